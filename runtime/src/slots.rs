//! A generational slot table: values found by a number, never a pointer. A
//! key is `slot << 32 | generation`; a slot is reused after its value is
//! removed, with a new generation, so a stale key never finds the value that
//! took its slot, and a forged one is refused. The C ABI's tensor handles and
//! PyTorch's storages (`storage.rs`) are each kept in one.

#[derive(Debug)]
pub struct Slots<T> {
    entries: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            entries: vec![],
            free: vec![],
            live: 0,
        }
    }
}

impl<T> Slots<T> {
    /// Stores `value`; its key (never 0).
    pub fn insert(&mut self, value: T) -> u64 {
        self.live += 1;
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.entries.push((0, None));
                (self.entries.len() - 1) as u32
            }
        };
        let entry = &mut self.entries[slot as usize];
        entry.0 = entry.0.wrapping_add(1).max(1);
        entry.1 = Some(value);
        (u64::from(slot) << 32) | u64::from(entry.0)
    }

    /// The value under `key`, if it is live.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        let (slot, generation) = ((key >> 32) as usize, key as u32);
        match self.entries.get_mut(slot) {
            Some((g, Some(value))) if *g == generation => Some(value),
            _ => None,
        }
    }

    /// Takes the value under `key` out, if it is live.
    pub fn remove(&mut self, key: u64) -> Option<T> {
        self.get_mut(key)?;
        let slot = (key >> 32) as u32;
        let taken = self.entries[slot as usize].1.take();
        self.live -= 1;
        self.free.push(slot);
        taken
    }

    /// Live values.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_key_stays_invalid_after_its_slot_is_reused() {
        let mut slots = Slots::default();
        let a = slots.insert("a");
        assert_eq!(slots.remove(a), Some("a"));
        let b = slots.insert("b");
        assert_eq!(a >> 32, b >> 32, "the slot is reused");
        assert_ne!(a, b, "with a new generation");
        assert!(slots.get_mut(a).is_none(), "the stale key is refused");
        assert_eq!(slots.get_mut(b), Some(&mut "b"));
        assert_eq!(slots.len(), 1);
        assert_eq!(slots.remove(b), Some("b"));
        assert_eq!(slots.remove(b), None, "a double remove is refused");
        assert!(slots.get_mut(0).is_none() && slots.get_mut(u64::MAX).is_none());
        assert!(slots.is_empty());
    }
}
