//! SPEC §9's grid in the test suite: the corners of the simulation that
//! `examples/compare-grid` runs whole (docs/compare-grid.md holds its tables; it takes a minute
//! in release, too long here), and the check that no row prints an interval above 0 beside a
//! drop at unequal k. Run with `--nocapture` to see the corners' tables.

// The simulation is the example's, so that the test and the published grid measure the same
// thing; the test uses part of it (the power table is the example's alone).
#[allow(dead_code)]
#[path = "../../examples/compare-grid/grid.rs"]
mod grid;

use callcheck::stats::compare::{SplitMix64, TaskPair, pooled};
use callcheck::stats::gate::{Group, Hypothesis, decide, smallest_p};
use grid::{binomial, task_hypothesis};

/// The corners of the grid (2 and 12 tasks, k = 3 and 20, every spread): coverage over 400
/// datasets, false alarms over 100 families of 16 tags (64 take four times as long: the
/// example's); one broken task over the corpus
/// (200 runs); four rows of the demo's printed drops against the gate's power (400 runs). A
/// few seconds in a debug build.
#[test]
fn the_statistics_hold_their_level_on_the_grid_corners() {
    let corners = |c: usize, k: u64| (c == 2 || c == 12) && (k == 3 || k == 20);
    let (table, mut failures) = grid::grid(400, 100, corners, &[16]);
    let (corpus, cf) = grid::corpus_table(200);
    failures.extend(cf);
    let (demo, df) = grid::demo_table(400, |row| {
        ["overall", "long-args", "parallel", "ref"].contains(&row)
    });
    failures.extend(df);
    println!("{table}\n{corpus}\n{demo}");
    assert!(
        failures.is_empty(),
        "{failures:#?}\n{table}\n{corpus}\n{demo}"
    );
}

/// SPEC §9: the test's statistic is the difference the interval estimates, so no row prints
/// an interval above 0 and a drop, whatever the tasks' sample counts. Random collections of
/// 1–12 tasks with 1–20 samples a side (transport errors and uneven collections make them
/// unequal), rates anywhere.
#[test]
fn no_interval_says_better_while_the_test_says_worse_at_unequal_k() {
    let mut rng = SplitMix64::new(0x44);
    let (mut better, mut checked) = (0, 0);
    for _ in 0..1000 {
        let c = 1 + rng.below(12) as usize;
        let tasks: Vec<TaskPair> = (0..c)
            .map(|_| {
                let (na, nb) = (1 + rng.below(20), 1 + rng.below(20));
                let (pa, pb) = (rng.unit(), rng.unit());
                TaskPair {
                    a_passes: binomial(&mut rng, na, pa),
                    a_scored: na,
                    b_passes: binomial(&mut rng, nb, pb),
                    b_scored: nb,
                }
            })
            .collect();
        let p = pooled(&tasks).unwrap();
        checked += 1;
        if p.interval.lower > 0.0 {
            better += 1;
            assert_eq!(p.p_value, 1.0, "{tasks:?}: {p:?}");
        }
        if p.p_value < 1.0 {
            assert!(p.difference < 0.0, "{tasks:?}: {p:?}");
            assert!(p.interval.lower < 0.0, "{tasks:?}: {p:?}");
        }
        // A family of this row alone and its tasks: nothing better is flagged.
        let family: Vec<Hypothesis> = std::iter::once(Hypothesis {
            group: Group::Row,
            p: p.p_value,
            smallest: smallest_p(
                &tasks
                    .iter()
                    .map(|t| (t.a_scored, t.b_scored))
                    .collect::<Vec<_>>(),
            ),
        })
        .chain(tasks.iter().map(task_hypothesis))
        .collect();
        let d = decide(&family);
        if d[0].rejected() {
            assert!(p.interval.lower < 0.0 && p.difference < 0.0, "{tasks:?}");
        }
        for (t, x) in tasks.iter().zip(&d[1..]) {
            if x.rejected() {
                assert!(t.b_rate() < t.a_rate(), "{t:?} flagged");
            }
        }
    }
    assert!(
        better > 100,
        "only {better} of {checked} collections were better"
    );
    // The collection that showed the old contradiction: one task with many samples falls,
    // many with one sample each rise. Weighted by samples (the exact CMH test) that was a
    // significant drop beside an interval of the equal-weight difference well above 0.
    let mut tasks = vec![TaskPair {
        a_passes: 20,
        a_scored: 20,
        b_passes: 0,
        b_scored: 20,
    }];
    tasks.extend(std::iter::repeat_n(
        TaskPair {
            a_passes: 0,
            a_scored: 1,
            b_passes: 1,
            b_scored: 1,
        },
        10,
    ));
    let p = pooled(&tasks).unwrap();
    assert!(p.difference > 0.8 && p.interval.lower > 0.0, "{p:?}");
    assert_eq!(p.p_value, 1.0);
}
