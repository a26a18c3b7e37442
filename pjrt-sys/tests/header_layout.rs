//! Checks our `#[repr(C)]` structs against the `pjrt_c_api.h` that ships inside
//! the installed `xla-cpu-pjrt` wheel: a small C program compiled against that
//! header prints the offset and size of every field of every struct we bind;
//! each must match ours, and ours must be at least as large.
//!
//! The header is found at `$EAGERTPU_PJRT_HEADER`, or inside the project's
//! `.venv` (created by `make setup`). No header text is committed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn find_header() -> PathBuf {
    if let Ok(p) = std::env::var("EAGERTPU_PJRT_HEADER") {
        return PathBuf::from(p);
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/lib");
    let mut tried = vec![];
    if let Ok(entries) = std::fs::read_dir(&lib) {
        for e in entries.flatten() {
            let h = e
                .path()
                .join("site-packages/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h");
            if h.exists() {
                return h;
            }
            tried.push(h);
        }
    }
    panic!(
        "pjrt_c_api.h not found (tried {tried:?} under {}); run `make setup` or set EAGERTPU_PJRT_HEADER",
        lib.display()
    );
}

/// Strips C comments.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The field names of `struct NAME { ... }` in the header, in order.
/// Anonymous unions contribute their members.
fn c_fields(header: &str, name: &str) -> Option<Vec<String>> {
    let opener = format!("struct {name} {{");
    let start = header.find(&opener)? + opener.len();
    let mut depth = 1;
    let mut end = start;
    for (i, c) in header[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = start + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let body = &header[start..end];
    let mut fields = vec![];
    for stmt in body.split(';') {
        let stmt = stmt.trim();
        if stmt.is_empty() {
            continue;
        }
        if let Some(macro_arg) = stmt.strip_prefix("_PJRT_API_STRUCT_FIELD(") {
            fields.push(macro_arg.trim_end_matches(')').trim().to_string());
            continue;
        }
        let name = if let Some(i) = stmt.find("(*") {
            // A function pointer: `void (*name)(args)`.
            let r = &stmt[i + 2..];
            r[..r.find(')').unwrap()].trim().to_string()
        } else {
            stmt.rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap()
                .to_string()
        };
        if !name.is_empty() {
            fields.push(name);
        }
    }
    Some(fields)
}

/// Our Rust field name -> the C member name, where they differ.
fn c_name<'a>(strukt: &str, rust_field: &'a str) -> &'a str {
    match (strukt, rust_field) {
        (_, "type_") => "type",
        // The anonymous union of PJRT_NamedValue.
        ("PJRT_NamedValue", "value") => "int64_value",
        (_, f) => f,
    }
}

#[test]
fn bound_structs_match_the_shipped_header() {
    let header_path = find_header();
    let header = strip_comments(&std::fs::read_to_string(&header_path).unwrap());
    let structs = pjrt_sys::bound_structs();

    let mut program = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"pjrt_c_api.h\"\nint main(void) {\n",
    );
    let mut expected_fields: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, _, ours) in &structs {
        let fields = c_fields(&header, name)
            .unwrap_or_else(|| panic!("{name} is not in {}", header_path.display()));
        let our_names: Vec<&str> = ours.iter().map(|f| c_name(name, f.name)).collect();
        for f in &fields {
            // A union member other than the one we name stands for the same bytes.
            let is_union_alias = *name == "PJRT_NamedValue"
                && [
                    "string_value",
                    "int64_array_value",
                    "float_value",
                    "bool_value",
                ]
                .contains(&f.as_str());
            assert!(
                is_union_alias || our_names.contains(&f.as_str()),
                "{name}.{f} is in the header but not in our binding: our struct would be too small"
            );
            if is_union_alias {
                continue;
            }
            program += &format!(
                "  printf(\"{name} {f} %zu %zu\\n\", offsetof({name}, {f}), sizeof((({name}*)0)->{f}));\n"
            );
        }
        if *name != "PJRT_Api" {
            program += &format!(
                "  printf(\"{name} STRUCT_SIZE %zu 0\\n\", (size_t){name}_STRUCT_SIZE);\n"
            );
        }
        expected_fields.insert(name, fields);
    }
    for (c, _) in pjrt_sys::ENUM_CONSTANTS {
        program += &format!("  printf(\"enum {c} %d 0\\n\", (int){c});\n");
    }
    program += "  printf(\"PJRT_Api MAJOR %d 0\\nPJRT_Api MINOR %d 0\\n\", PJRT_API_MAJOR, PJRT_API_MINOR);\n  return 0;\n}\n";

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("header_layout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, &program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg("-I")
        .arg(header_path.parent().unwrap())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling the layout probe failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let text = String::from_utf8(run.stdout).unwrap();

    let mut c: HashMap<(String, String), (usize, usize)> = HashMap::new();
    let mut enums: HashMap<String, i64> = HashMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts[0] == "enum" {
            enums.insert(parts[1].into(), parts[2].parse().unwrap());
        } else {
            c.insert(
                (parts[0].into(), parts[1].into()),
                (parts[2].parse().unwrap(), parts[3].parse().unwrap()),
            );
        }
    }

    let mut checked = 0;
    for (name, struct_size, ours) in &structs {
        for f in ours.iter() {
            let key = (name.to_string(), c_name(name, f.name).to_string());
            let Some(&(offset, size)) = c.get(&key) else {
                // A field newer than this header: allowed, it is appended.
                continue;
            };
            assert_eq!(f.offset, offset, "{name}.{}: offset", f.name);
            assert_eq!(f.size, size, "{name}.{}: size", f.name);
            checked += 1;
        }
        if *name != "PJRT_Api" {
            let c_size = c[&(name.to_string(), "STRUCT_SIZE".to_string())].0;
            assert!(
                *struct_size >= c_size,
                "{name}: our STRUCT_SIZE {struct_size} is smaller than the header's {c_size}"
            );
        }
    }
    assert!(checked > 300, "only {checked} fields checked");
    for (cname, value) in pjrt_sys::ENUM_CONSTANTS {
        assert_eq!(enums[*cname], *value as i64, "{cname}");
    }
    let major = c[&("PJRT_Api".to_string(), "MAJOR".to_string())].0 as i32;
    let minor = c[&("PJRT_Api".to_string(), "MINOR".to_string())].0 as i32;
    assert_eq!(major, pjrt_sys::PJRT_API_MAJOR);
    assert!(
        minor <= pjrt_sys::PJRT_API_MINOR,
        "header 0.{minor} is newer than our binding"
    );
    // Every entry of the header's table is bound (we bind the whole 0.81 table).
    assert_eq!(
        expected_fields["PJRT_Api"].len(),
        pjrt_sys::API_ENTRIES.len() + 3,
        "the header's function table has entries we do not bind"
    );
}
