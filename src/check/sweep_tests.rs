use super::*;
use std::path::Path;

#[test]
fn samples_include_both_ends() {
    assert_eq!(sample_positions(28, 3), vec![0, 6, 13, 20, 27]);
    assert_eq!(sample_positions(2, 3), vec![0, 1]);
    assert_eq!(sample_positions(1, 3), vec![0]);
    // `--samples` past the line's length (it was a division by zero at usize::MAX).
    assert_eq!(sample_positions(4, usize::MAX), vec![0, 1, 2, 3]);
    assert_eq!(sample_positions(4, 1_000_000), vec![0, 1, 2, 3]);
}

#[test]
fn bisection_halves_disagreeing_intervals_only() {
    let line: Vec<usize> = (0..10).collect();
    let cells = [
        Cell::Violated,
        Cell::Unchecked,
        Cell::Unchecked,
        Cell::Unchecked,
        Cell::Holds,
        Cell::Unchecked,
        Cell::Unchecked,
        Cell::Unchecked,
        Cell::Unchecked,
        Cell::Holds,
    ];
    assert_eq!(bisection_points(&line, |p| cells[p]), vec![2]);
    let cells = [Cell::Violated, Cell::Holds, Cell::Holds];
    assert!(bisection_points(&line[..3], |p| cells[p]).is_empty());
}

#[test]
fn inference_needs_agreeing_neighbours() {
    let line: Vec<usize> = (0..6).collect();
    let mut cells =
        vec![Cell::Holds, Cell::Unchecked, Cell::Holds, Cell::Unchecked, Cell::Violated, Cell::Unchecked];
    infer_line(&line, &mut cells);
    assert_eq!(
        cells,
        vec![Cell::Holds, Cell::InferredHolds, Cell::Holds, Cell::Unchecked, Cell::Violated, Cell::Unchecked]
    );
}

/// A verdict that is not monotone in the knob: every change among the checked points is
/// refined to neighbouring values and reported, and the sweep says it is not monotone.
#[test]
fn a_verdict_that_is_not_monotone_is_reported_with_every_boundary() {
    let scenario = Scenario::load(Path::new("models/basic-quorum.toml")).expect("the model loads");
    let base = scenario.base_policy.clone();
    let plan = plan(scenario, "[policy]".into(), base, &["replica_ack_timeout=100ms..2s".into()]).unwrap();
    assert_eq!(plan.point_count(), 20);
    // Holds at 600ms..1s and from 1600ms on, violated elsewhere.
    let truth = |p: usize| if (5..=9).contains(&p) || p >= 15 { Found::Holds } else { Found::Violated };
    let search = SearchOptions { samples: 3, exhaustive: false, shard: None };
    let mut calls = 0;
    let shape = Shape::of(&plan);
    let found = search_points(&shape, 1, &search, &mut |p| {
        calls += 1;
        Ok(vec![truth(p)])
    })
    .unwrap();
    assert!(calls < 20, "bisection checks fewer points than there are ({calls})");
    let name = PropertyName::AckedWritesPersist;
    let p = analyse(&plan, &shape, name, 0, &found, true);
    assert!(!p.monotone);
    let changes: Vec<(&str, &str, bool)> =
        p.boundaries.iter().map(|b| (b.violated_at.as_str(), b.holds_at.as_str(), b.adjacent)).collect();
    assert_eq!(changes, vec![("500ms", "600ms", true), ("1100ms", "1s", true), ("1500ms", "1600ms", true)]);
    // No cell contradicts a checked point.
    for (point, f) in &found {
        assert_eq!(p.cells[*point].verdict().map(|v| v == Verdict::Holds), Some(f[0] == Found::Holds));
    }
}

#[test]
fn shards_parse() {
    assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
    assert!(Shard::parse("4/4").is_err());
    assert!(Shard::parse("x").is_err());
}
