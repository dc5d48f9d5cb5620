//! Evaluation of the defaults over the device latencies, queue depths and workloads a user may
//! have, on hardware and under emulation: in each cell a grid search over parameter sets finds
//! the set with the fewest interrupts per I/O whose added latency stays within the bound. The
//! defaults must stay within the bound and take no more interrupts than interrupts alone (but
//! for the probes that find polling does not pay); how close they come to the best set is
//! reported per cell and counted, twice: against every set, and against the sets whose
//! `budget_percent` is within the bound. A set with a larger budget adds more than the bound to
//! each completion it polls and meets the bound only in the mean over all I/O, diluted by the
//! completions it leaves to interrupts.
//!
//! Where the load is a closed loop at a fixed depth and the device sets its pace, the latency
//! polls add comes off the IOPS: the table also shows the IOPS of the defaults and of the best
//! set against interrupts alone, and counts the cells where some set within 5% of the fewest
//! interrupts still runs [`KEEP_IOPS`] of interrupts alone's IOPS.
//!
//! The table lands in `target/model-grid.txt` (`cargo test grid -- --nocapture` also prints it);
//! design.rst quotes it.

use crate::model::{run_settled, Costs, Drive, Outcome, Phase, MS, US};
use crate::policy::*;
use std::fmt::Write as _;

const LATENCIES: [u64; 6] = [5 * US, 20 * US, 100 * US, 500 * US, MS, 5 * MS];
const DEPTHS: [u32; 5] = [1, 4, 16, 32, 128];

/// Completions a cell aims at (fewer for the sparse load, which runs as long as the steady one).
const COMPLETIONS: u64 = 5_000;

/// The bound on added latency: the defaults' own budget, in percent of the device latency.
fn bound_percent() -> u64 {
    PARAM_SPECS[param::LATENCY_BUDGET_PERCENT].default.into()
}

/// How much worse than the best set the defaults may be, in interrupts per I/O.
const WITHIN_PERCENT: f64 = 5.0;

/// The IOPS against interrupts alone that issue 11 asks of adaptive polling (0.97x stock).
const KEEP_IOPS: f64 = 0.97;

/// What the defaults may spend over interrupts alone, in interrupts per I/O: an episode that
/// turns out not to pay costs a mask, a poll or two and an unmask before the backoff.
const PROBE_PERCENT: f64 = 1.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    Steady,
    Bursty,
    Ramping,
    Sparse,
    OnOff,
}

const LOADS: [Load; 5] = [
    Load::Steady,
    Load::Bursty,
    Load::Ramping,
    Load::Sparse,
    Load::OnOff,
];

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Steady => "steady",
            Load::Bursty => "bursty",
            Load::Ramping => "ramping",
            Load::Sparse => "sparse",
            Load::OnOff => "on/off",
        }
    }

    /// The workload's phases for a device of `latency` at depth `qd`, long enough for about
    /// [`COMPLETIONS`] completions.
    fn phases(self, latency: u64, qd: u32, costs: &Costs) -> Vec<Phase> {
        // A completion every `per` at full depth: the device's or the CPU's limit.
        let per = |qd: u32| (latency / u64::from(qd)).max(costs.completion_ns + costs.irq_ns / 4);
        let mut phases = Vec::new();
        let mut t = 0;
        let mut push = |t: &mut u64, len: u64, drive: Drive| {
            *t += len;
            phases.push(Phase { until: *t, drive });
        };
        match self {
            Load::Steady => push(&mut t, COMPLETIONS * per(qd), Drive::Closed { qd }),
            Load::Bursty => {
                // qd at once, a pause of two latencies after the last completes.
                let cycle = 3 * latency.max(per(qd) * u64::from(qd));
                let cycles = (COMPLETIONS / u64::from(qd)).max(8);
                push(
                    &mut t,
                    cycles * cycle,
                    Drive::Bursts {
                        qd,
                        think: 2 * latency,
                    },
                );
            }
            Load::Ramping => {
                let steps: Vec<u32> = (0..8).map(|i| 1 << i).filter(|&d| d <= qd).collect();
                for &d in &steps {
                    let len = COMPLETIONS / steps.len() as u64 * per(d);
                    push(&mut t, len, Drive::Closed { qd: d });
                }
            }
            Load::Sparse => {
                // A tenth of what the depth carries, arriving independently.
                let gap = 10 * per(qd);
                push(&mut t, COMPLETIONS / 2 * gap, Drive::Open { gap, cap: qd });
            }
            Load::OnOff => {
                // Spells of 64 latencies at full depth, then as long idle.
                let spell = 64 * latency.max(per(qd) * u64::from(qd));
                let cycles = (COMPLETIONS / (64 * u64::from(qd))).max(4);
                for _ in 0..cycles {
                    push(&mut t, spell, Drive::Closed { qd });
                    push(&mut t, spell, Drive::Idle);
                }
            }
        }
        phases
    }
}

/// The parameter sets searched: every combination of these, and adaptive polling off.
fn candidates() -> Vec<Params> {
    let d = crate::defaults();
    let mut sets = vec![Params {
        enabled: false,
        ..d
    }];
    for sample_size in [16, 32, 64, 256] {
        for target_batch in [4, 16, 64, 256] {
            for max_delay_us in [20, 100, 1_000, 10_000] {
                for budget_percent in [10, 25, 40] {
                    sets.push(Params {
                        sample_size,
                        target_batch,
                        max_delay_ns: max_delay_us * US,
                        budget_percent,
                        ..d
                    });
                }
            }
        }
    }
    assert!(sets.contains(&d), "the defaults are among the candidates");
    sets
}

struct Cell {
    costs: Costs,
    latency: u64,
    qd: u32,
    load: Load,
}

struct Verdict {
    line: String,
    failure: Option<String>,
    near_best: bool,
    /// The same against the sets whose budget is within the bound.
    near_best_in_budget: bool,
    /// Some set within the bound and within 5% of the fewest interrupts runs [`KEEP_IOPS`].
    near_best_keeps_iops: bool,
}

fn evaluate(cell: &Cell, sets: &[Params]) -> Verdict {
    let phases = cell.load.phases(cell.latency, cell.qd, &cell.costs);
    let outcomes: Vec<Outcome> = sets
        .iter()
        .map(|&p| run_settled(p, cell.costs, cell.latency, &phases))
        .collect();
    // The first set is adaptive polling off: plain interrupts.
    let plain = &outcomes[0];
    let bound = (cell.latency * bound_percent() / 100) as f64;
    let added = |o: &Outcome| o.added_wait_ns(plain);
    // The fewest interrupts per I/O within the bound, among the sets `eligible` admits.
    let best = |eligible: &dyn Fn(&Params) -> bool| {
        outcomes
            .iter()
            .zip(sets)
            .enumerate()
            .filter(|(_, (o, p))| added(o) <= bound && eligible(p))
            .min_by(|(_, (a, _)), (_, (b, _))| {
                a.interrupts_per_io().total_cmp(&b.interrupts_per_io())
            })
            .map(|(i, _)| i)
            .expect("adaptive off is always within the bound")
    };
    let best_in_budget = best(&|p| !p.enabled || p.budget_percent as u64 <= bound_percent());
    let best = best(&|_| true);
    let d = crate::defaults();
    let di = sets.iter().position(|p| *p == d).unwrap();
    let (def, top) = (&outcomes[di], &outcomes[best]);
    // Whether `o` takes at most 5% more interrupts per I/O than `best`.
    let near = |o: &Outcome, best: &Outcome| {
        o.interrupts_per_io() <= best.interrupts_per_io() * (1.0 + WITHIN_PERCENT / 100.0)
    };
    let near_best = near(def, top);
    let near_best_in_budget = near(def, &outcomes[best_in_budget]);
    let near_best_keeps_iops = outcomes
        .iter()
        .any(|o| added(o) <= bound && near(o, top) && o.iops_ratio(plain) >= KEEP_IOPS);
    let name = format!(
        "{:8} {:>5}us QD{:<3} {:7}",
        cell.costs.name,
        cell.latency / US,
        cell.qd,
        cell.load.name()
    );
    let line = format!(
        "{name} | defaults {:.3} int/IO ({:.3} IRQ/IO, {:3.0}% polled, +{:6.1}us, IOPS x{:.2}) \
         | best {:.3} int/IO (+{:6.1}us, IOPS x{:.2}: {}) | plain {:.3} | bound +{:.1}us{}{}",
        def.interrupts_per_io(),
        def.irqs_per_io(),
        100.0 * def.poll_share(),
        added(def) / 1e3,
        def.iops_ratio(plain),
        top.interrupts_per_io(),
        added(top) / 1e3,
        top.iops_ratio(plain),
        describe(&sets[best]),
        plain.interrupts_per_io(),
        bound / 1e3,
        match (near_best, near_best_in_budget) {
            (true, _) => "",
            (false, true) => " | not within 5% (within 5% of the sets within the budget)",
            (false, false) => " | not within 5%",
        },
        if near_best_keeps_iops {
            ""
        } else {
            " | none near it keeps the IOPS"
        },
    );
    let failure = if added(def) > bound {
        Some(format!(
            "{name}: defaults add {:.1}us, over the bound",
            added(def) / 1e3
        ))
    } else if def.interrupts_per_io() > plain.interrupts_per_io() * (1.0 + PROBE_PERCENT / 100.0) {
        Some(format!(
            "{name}: defaults take {:.3} interrupts per I/O, interrupts alone {:.3}",
            def.interrupts_per_io(),
            plain.interrupts_per_io()
        ))
    } else {
        None
    };
    Verdict {
        line,
        failure,
        near_best,
        near_best_in_budget,
        near_best_keeps_iops,
    }
}

fn describe(p: &Params) -> String {
    if !p.enabled {
        return "off".into();
    }
    format!(
        "sample {} batch {} delay {}us budget {}%",
        p.sample_size,
        p.target_batch,
        p.max_delay_ns / US,
        p.budget_percent
    )
}

#[test]
fn defaults_stay_within_the_bound_and_save_interrupts_in_every_cell() {
    let sets = candidates();
    let mut cells = Vec::new();
    for costs in [Costs::hardware(), Costs::emulator()] {
        for latency in LATENCIES {
            for qd in DEPTHS {
                for load in LOADS {
                    cells.push(Cell {
                        costs,
                        latency,
                        qd,
                        load,
                    });
                }
            }
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = cells.len().div_ceil(threads);
    let verdicts: Vec<Verdict> = std::thread::scope(|s| {
        let handles: Vec<_> = cells
            .chunks(chunk)
            .map(|part| s.spawn(|| part.iter().map(|c| evaluate(c, &sets)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut table = String::new();
    for v in &verdicts {
        writeln!(table, "{}", v.line).unwrap();
    }
    let near = verdicts.iter().filter(|v| v.near_best).count();
    let near_in_budget = verdicts.iter().filter(|v| v.near_best_in_budget).count();
    let keeps_iops = verdicts.iter().filter(|v| v.near_best_keeps_iops).count();
    writeln!(
        table,
        "defaults within {WITHIN_PERCENT}% of the best in {near} of {} cells; of the best whose \
         budget is within the bound, in {near_in_budget}",
        verdicts.len()
    )
    .unwrap();
    writeln!(
        table,
        "a set within {WITHIN_PERCENT}% of the best runs {KEEP_IOPS}x the IOPS of interrupts \
         alone in {keeps_iops} of {} cells",
        verdicts.len()
    )
    .unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target/model-grid.txt");
    std::fs::write(path, &table).unwrap();
    println!("{table}");
    let failures: Vec<&String> = verdicts.iter().filter_map(|v| v.failure.as_ref()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cells:\n{}",
        failures.len(),
        verdicts.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
