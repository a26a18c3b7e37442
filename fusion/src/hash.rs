//! Hashing: a fast hasher for in-memory keys (op signatures, graph lookups)
//! and a stable 128-bit digest for keys that outlive the process (the on-disk
//! compile cache). Neither is cryptographic; every cache that uses them also
//! compares the full key (the graph, or the program text) on a hit.

use std::hash::{BuildHasherDefault, Hash, Hasher};

/// The Fx hash (rustc's): one multiply and rotate per word. Fast for the short
/// keys of the op path; not DoS-resistant, which in-process keys need not be.
#[derive(Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `HashMap<K, V, FxBuild>` hashes with [`FxHasher`].
pub type FxBuild = BuildHasherDefault<FxHasher>;

/// The Fx hash of one value.
pub fn fx_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = FxHasher::default();
    value.hash(&mut h);
    h.finish()
}

/// A 128-bit digest stable across processes, platforms and Rust versions:
/// two FNV-1a 64 lanes with different offsets, finished with a mix.
pub fn digest128(parts: &[&[u8]]) -> u128 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x84222325_cbf29ce4;
    for (i, part) in parts.iter().enumerate() {
        // Length-prefix each part so ("ab", "c") and ("a", "bc") differ.
        for byte in (part.len() as u64).to_le_bytes().iter().chain(part.iter()) {
            a = (a ^ *byte as u64).wrapping_mul(PRIME);
            b = (b ^ (*byte as u64).rotate_left(i as u32 % 8)).wrapping_mul(PRIME ^ 0x9e37_79b9);
        }
    }
    let mix = |mut x: u64| {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    };
    ((mix(a) as u128) << 64) | mix(b ^ a.rotate_left(17)) as u128
}

/// A 64-bit checksum of bytes (FNV-1a), for cache-entry payloads.
pub fn checksum64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        h = (h ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_stable_and_separate_parts() {
        // Fixed values: a change here invalidates every on-disk cache.
        assert_eq!(digest128(&[b"abc"]), digest128(&[b"abc"]));
        assert_ne!(digest128(&[b"ab", b"c"]), digest128(&[b"a", b"bc"]));
        assert_ne!(digest128(&[b"abc"]), digest128(&[b"abd"]));
        assert_eq!(checksum64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(checksum64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn fx_hash_distinguishes_small_keys() {
        assert_ne!(fx_hash(&(1u32, 2u32)), fx_hash(&(2u32, 1u32)));
        assert_ne!(fx_hash("ab"), fx_hash("ba"));
    }
}
