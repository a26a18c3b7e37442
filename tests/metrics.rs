//! Host syncs counted by call site and CPU fallbacks counted by op: both in
//! the runtime's metrics, its JSON and its report.

mod common;

use eagertpu::{Tensor, metrics, note_fallback, with_origin};

fn site_count(site: &str) -> u64 {
    let m = metrics().unwrap();
    m.host_syncs_by_site
        .iter()
        .find(|(s, _)| s == site)
        .map_or(0, |(_, n)| *n)
}

all_modes! {
fn a_host_read_is_counted_at_the_line_that_made_it() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let y = x.mul(2.0).unwrap();
    let mut site = String::new();
    for _ in 0..3 {
        assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
        site = format!("{}:{}:", file!(), line!() - 1);
    }
    let m = metrics().unwrap();
    let (found, n) = m
        .host_syncs_by_site
        .iter()
        .find(|(s, _)| s.starts_with(&site))
        .unwrap_or_else(|| panic!("{site} not in {:?}", m.host_syncs_by_site));
    assert!(*n >= 3, "{found}: {n}");
    assert!(m.to_json().contains(&format!("\"{found}\": {n}")), "{}", m.to_json());
    assert!(m.report().contains(found.as_str()), "{}", m.report());

    // A foreign caller's origin (the C ABI passes the Python file:line).
    let foreign = format!("user_script.py:{}", eagertpu::mode().unwrap().name());
    let before = site_count(&foreign);
    with_origin(&foreign, || y.sum(&[], false).unwrap().item::<f32>().unwrap());
    assert_eq!(site_count(&foreign), before + 1);
}
}

#[test]
fn fallbacks_are_counted_by_op_and_the_first_is_flagged() {
    let op = "aten::an_op_without_a_kernel.out";
    assert!(
        note_fallback(op).unwrap(),
        "the first fallback of an op is flagged"
    );
    assert!(!note_fallback(op).unwrap());
    assert!(!note_fallback(op).unwrap());
    let m = metrics().unwrap();
    assert!(
        m.fallbacks.contains(&(op.to_string(), 3)),
        "{:?}",
        m.fallbacks
    );
    assert!(
        m.to_json()
            .contains(&format!("\"fallbacks\": {{\"{op}\": 3}}")),
        "{}",
        m.to_json()
    );
    assert!(m.report().contains(&format!("  {op}: 3")), "{}", m.report());
}
