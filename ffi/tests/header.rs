//! `include/eagertpu.h` against the Rust side: every function declared in
//! the header exists with the same return and argument types, every entry
//! point is declared, and the enum values agree.

use std::collections::BTreeMap;
use std::path::Path;

use eagertpu::DType;

fn header() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/eagertpu.h");
    let text = std::fs::read_to_string(path).unwrap();
    // Strip comments.
    let mut out = String::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    without_macros(&out)
}

/// The text without `#define`s (a macro's continued lines included), whose
/// lines end in no `;`.
fn without_macros(h: &str) -> String {
    let mut out = String::new();
    let mut continued = false;
    for line in h.lines() {
        let in_macro = continued || line.trim_start().starts_with("#define");
        continued = in_macro && line.trim_end().ends_with('\\');
        if !in_macro {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `const int64_t *` -> `const int64_t*`.
fn normalize(ty: &str) -> String {
    ty.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" *", "*")
}

/// Function prototypes: name -> (return type, argument types).
fn prototypes(h: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for stmt in h.split(';') {
        let stmt = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some(open) = stmt.find('(') else { continue };
        if !stmt.ends_with(')')
            || stmt.contains('{')
            || stmt.starts_with('#')
            || stmt.starts_with("typedef")
        {
            continue;
        }
        let head = stmt[..open].trim();
        let Some(split) = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')) else {
            continue;
        };
        let (ret, name) = (normalize(&head[..=split]), head[split + 1..].to_string());
        let args = &stmt[open + 1..stmt.len() - 1];
        let args: Vec<String> = if args.trim() == "void" || args.trim().is_empty() {
            vec![]
        } else {
            args.split(',')
                .map(|a| {
                    let a = a.trim();
                    let cut = a
                        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap();
                    normalize(&a[..=cut])
                })
                .collect()
        };
        out.insert(name, (ret, args));
    }
    out
}

/// `NAME = value` pairs from the header's enums.
fn enum_values(h: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for part in h.split(['{', '}', ',']) {
        if let Some((k, v)) = part.split_once('=') {
            let k = k.trim();
            if let Ok(v) = v.trim().parse::<i64>()
                && k.starts_with("ETPU_")
            {
                out.insert(k.to_string(), v);
            }
        }
    }
    out
}

#[test]
fn the_header_declares_exactly_the_entry_points_with_their_types() {
    let h = header();
    let declared = prototypes(&h);
    let rust: BTreeMap<String, (String, Vec<String>)> = eagertpu_ffi::all_signatures()
        .into_iter()
        .map(|s| {
            (
                s.name.to_string(),
                (
                    s.ret.to_string(),
                    s.args.iter().map(|a| a.to_string()).collect(),
                ),
            )
        })
        .collect();
    for (name, sig) in &rust {
        assert_eq!(declared.get(name), Some(sig), "{name}: header vs Rust");
    }
    for name in declared.keys() {
        assert!(
            rust.contains_key(name),
            "{name} is declared in the header but not implemented"
        );
    }
    assert!(rust.len() >= 30, "{} entry points", rust.len());
}

#[test]
fn the_header_enums_match_the_rust_constants() {
    let e = enum_values(&header());
    assert_eq!(e["ETPU_OK"], eagertpu_ffi::ETPU_OK as i64);
    assert_eq!(
        e["ETPU_INVALID_ARGUMENT"],
        eagertpu_ffi::ETPU_INVALID_ARGUMENT as i64
    );
    assert_eq!(e["ETPU_BAD_HANDLE"], eagertpu_ffi::ETPU_BAD_HANDLE as i64);
    assert_eq!(e["ETPU_FAILED"], eagertpu_ffi::ETPU_FAILED as i64);
    assert_eq!(e["ETPU_PANIC"], eagertpu_ffi::ETPU_PANIC as i64);
    let names = [
        "BOOL", "U8", "I8", "I16", "I32", "I64", "F16", "BF16", "F32", "F64",
    ];
    for (i, (name, d)) in names.iter().zip(DType::ALL).enumerate() {
        assert_eq!(e[&format!("ETPU_{name}")], i as i64, "{d}");
        assert_eq!(format!("{d:?}").to_uppercase(), *name);
    }
    assert_eq!(
        (
            e["ETPU_MODE_DEBUG"],
            e["ETPU_MODE_STRICT"],
            e["ETPU_MODE_FUSED"]
        ),
        (0, 1, 2)
    );
    assert_eq!(
        (
            e["ETPU_SCALAR_BOOL"],
            e["ETPU_SCALAR_INT"],
            e["ETPU_SCALAR_FLOAT"]
        ),
        (
            eagertpu_ffi::ETPU_SCALAR_BOOL as i64,
            eagertpu_ffi::ETPU_SCALAR_INT as i64,
            eagertpu_ffi::ETPU_SCALAR_FLOAT as i64
        )
    );
    assert_eq!(
        (
            e["ETPU_OPERAND_HANDLE"],
            e["ETPU_OPERAND_VIEW"],
            e["ETPU_OPERAND_SCALAR"]
        ),
        (
            eagertpu_ffi::ETPU_OPERAND_HANDLE as i64,
            eagertpu_ffi::ETPU_OPERAND_VIEW as i64,
            eagertpu_ffi::ETPU_OPERAND_SCALAR as i64
        )
    );
    let kinds = ["COMPILE", "DISK_LOAD", "EXECUTE", "HOST_READ", "TO_DEVICE"];
    for (name, kind) in kinds.iter().zip(eagertpu::trace::Kind::ALL) {
        assert_eq!(e[&format!("ETPU_TRACE_{name}")], kind as i64, "{kind:?}");
    }
    let raw = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/eagertpu.h"),
    );
    let version = h_version(&raw.unwrap());
    assert_eq!(version, eagertpu_ffi::EAGERTPU_ABI_VERSION);
}

fn h_version(h: &str) -> u32 {
    h.lines()
        .find_map(|l| l.trim().strip_prefix("#define EAGERTPU_ABI_VERSION"))
        .and_then(|v| v.trim().parse().ok())
        .expect("EAGERTPU_ABI_VERSION in the header")
}

/// The header's elementwise op lists are fusion's op tables, rendered
/// (`ffi/src/op_lists.rs`). `ETPU_BLESS=1 cargo test -p eagertpu-ffi --test
/// header` rewrites them after a change to the tables.
#[test]
fn the_header_op_lists_are_the_op_tables() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/eagertpu.h");
    let text = std::fs::read_to_string(&path).unwrap();
    let begin = text
        .find("/* BEGIN elementwise op lists")
        .expect("the header's BEGIN elementwise op lists line");
    let end = text[begin..]
        .find(eagertpu_ffi::OP_LISTS_END)
        .map(|i| begin + i + eagertpu_ffi::OP_LISTS_END.len() + 1)
        .expect("the header's END elementwise op lists line");
    let want = eagertpu_ffi::elementwise_op_lists();
    if text[begin..end] == want {
        return;
    }
    if std::env::var_os("ETPU_BLESS").is_some() {
        let updated = format!("{}{want}{}", &text[..begin], &text[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "include/eagertpu.h's op lists differ from fusion's op tables; run \
         `ETPU_BLESS=1 cargo test -p eagertpu-ffi --test header` and commit the header.\n\
         expected:\n{want}"
    );
}
