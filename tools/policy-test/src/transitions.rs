//! One test per transition of the policy state machine, and per rule that sizes a poll.

use crate::policy::*;
use crate::IdleCpu;

const US: u64 = 1_000;

/// Small samples, so tests reach decisions quickly; the budget and caps are the defaults'.
fn params() -> Params {
    Params {
        sample_size: 16,
        backoff_ns: 1_000 * US,
        backoff_max_ns: 10_000 * US,
        episode_polls: 1000,
        ..crate::defaults()
    }
}

/// `count` completions that each took `latency` from submission.
fn timed(count: u32, latency: u64) -> Reaped {
    Reaped {
        count,
        timed: count,
        latency_sum_ns: u64::from(count) * latency,
    }
}

/// The dense stream most tests use: 4 completions every 4 us (a 1 us gap), each after 40 us in
/// the device, 32 left in flight. An interrupt reaps 4, so a poll pays from 6 (one and a half
/// times that), which a 6 us wait collects: where an episode starts. The budget's 4 us allows
/// an 8 us wait (a poll adds half its wait), twice that while interrupts reap most completions.
const EVERY: u64 = 4 * US;
const LATENCY: u64 = 40 * US;
const WAIT: u64 = 6 * US;

/// Feeds interrupts of `reaped` every `every` ns, on a CPU that is otherwise idle, until the
/// policy decides something other than staying, or a second of them went by. Returns that
/// decision and its time.
fn sample(
    pol: &mut Policy,
    start: u64,
    every: u64,
    reaped: Reaped,
    inflight: u32,
) -> (Action, u64) {
    sample_on(pol, start, every, reaped, inflight, false)
}

/// [`sample`] on a CPU the queue keeps `busy` (never idle) or not.
fn sample_on(
    pol: &mut Policy,
    start: u64,
    every: u64,
    reaped: Reaped,
    inflight: u32,
    busy: bool,
) -> (Action, u64) {
    let p = params();
    let mut now = start;
    loop {
        let idle = if busy { 0 } else { now };
        let action = pol.on_irq(now, reaped, inflight, &p, || Some(idle));
        if action != Action::Stay || now > start + 1_000_000 * US {
            return (action, now);
        }
        now += every;
    }
}

/// A policy polling the dense stream.
fn polling() -> (Policy, u64) {
    let mut pol = Policy::new();
    let (action, now) = sample(&mut pol, 1_000 * US, EVERY, timed(4, LATENCY), 32);
    assert_eq!(action, Action::StartPolling { wait_ns: WAIT });
    (pol, now)
}

/// Polls every `wait` after `now` (as the policy asks), each reaping what the stream's rate
/// brings in that time, after `latency` in the device and half the wait on average in the CQ,
/// `n` of them. Returns the time of the last and the last action.
fn poll_at_rate(pol: &mut Policy, now: u64, n: u32, gap: u64, latency: u64) -> (u64, Action) {
    poll_at_rate_with(pol, now, n, gap, latency, &params())
}

/// [`poll_at_rate`] with parameters `p`.
fn poll_at_rate_with(
    pol: &mut Policy,
    mut now: u64,
    n: u32,
    gap: u64,
    latency: u64,
    p: &Params,
) -> (u64, Action) {
    let start = now;
    let mut arrived = 0;
    let mut action = Action::Stay;
    for _ in 0..n {
        let wait = pol.wait_ns();
        now += wait;
        // Whole completions since the start, so the rate comes out exact however waits and
        // the gap divide.
        let count = ((now - start) / gap - arrived).max(1);
        arrived += count;
        // A CPU the queue keeps saturated (only episodes on a busy CPU ask).
        let reaped = timed(count as u32, latency + wait / 2);
        action = pol.on_timer(now, 0, reaped, 32, p, || Some(0));
        if !matches!(action, Action::Rearm { .. }) {
            break;
        }
    }
    (now, action)
}

#[test]
fn dense_queue_starts_polling_at_the_shortest_wait_that_pays() {
    let (pol, _) = polling();
    assert_eq!(pol.stage(), Stage::Poll);
    let est = pol.estimates();
    assert_eq!(est.latency_ns, LATENCY);
    assert_eq!(rate_per_sec(est.gap_ns), 1_000_000);
    assert_eq!(rate_per_sec(est.ref_gap_ns), 1_000_000);
    assert_eq!(pol.batch(), 6);
    assert!(!pol.paced_by_cpu());
}

#[test]
fn first_episode_waits_for_a_baseline_of_timed_completions() {
    let p = params();
    let mut pol = Policy::new();
    let mut now = 0;
    let mut counted = 0;
    loop {
        let action = pol.on_irq_idle(now, timed(4, LATENCY), 32, &p);
        if action != Action::Stay {
            break;
        }
        counted += 4;
        now += EVERY;
    }
    // The opening interrupt only starts the sample (its 4 arrived before it); the deciding one
    // completes BASELINE_MIN timed completions, over which interrupts' rate is measured too.
    assert_eq!(counted, BASELINE_MIN);
}

#[test]
fn untimed_completions_fall_back_to_littles_law() {
    let mut pol = Policy::new();
    // 36 on the device at a 1 us gap: 36 us by Little's law.
    let (action, _) = sample(
        &mut pol,
        0,
        EVERY,
        Reaped {
            count: 4,
            ..Reaped::default()
        },
        32,
    );
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
    assert_eq!(pol.estimates().latency_ns, 36 * US);
}

#[test]
fn sparse_queue_stays_on_interrupts() {
    let mut pol = Policy::new();
    // One completion every 50 us: no wait within the budget collects a batch.
    let (action, _) = sample(&mut pol, 0, 50 * US, timed(1, LATENCY), 32);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(rate_per_sec(pol.estimates().gap_ns), 20_000);
}

#[test]
fn a_lone_completion_skips_the_policy_only_while_sampling() {
    let pol = Policy::new();
    // At most one command on the device: nothing to batch, no clock read needed.
    assert!(pol.skip_lone_irq(1, 0));
    assert!(pol.skip_lone_irq(0, 0));
    // A second completion, reaped now or still in flight, is something to batch.
    assert!(!pol.skip_lone_irq(2, 0));
    assert!(!pol.skip_lone_irq(1, 1));
    // A polling queue's policy sees every interrupt that slips through ...
    let (mut pol, now) = polling();
    assert!(!pol.skip_lone_irq(1, 0));
    // ... and a backing-off one needs the clock to see its backoff end.
    let t = stall(&mut pol, now, 30);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert!(!pol.skip_lone_irq(1, 0));
    busy_backoff(&mut pol, t);
    assert_eq!(pol.stage(), Stage::Sample);
    assert!(pol.skip_lone_irq(1, 0));
}

#[test]
fn interrupts_that_already_reap_a_batch_each_stay_on() {
    let mut pol = Policy::new();
    // 8 per interrupt, 2 us apart: a poll must collect 12, which takes 24 us, longer than even
    // twice the budget allows.
    let (action, _) = sample(&mut pol, 0, 16 * US, timed(8, LATENCY), 32);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn a_sample_ends_after_half_the_commands_in_flight() {
    // The defaults' sample of 16 completions, on a queue holding 12 (10 left at each interrupt
    // of 2): the sample ends after 8 (the least), while the burst is still in flight.
    let p = crate::defaults();
    let mut pol = Policy::new();
    let mut now = 1_000 * US;
    pol.on_irq_idle(now, timed(2, LATENCY), 10, &p);
    for _ in 0..4 {
        assert_eq!(pol.estimates().gap_ns, 0, "the sample is still open");
        now += EVERY;
        pol.on_irq_idle(now, timed(2, LATENCY), 10, &p);
    }
    assert_eq!(pol.estimates().gap_ns, 2 * US);
    assert_eq!(pol.estimates().depth_x16, 12 * 16);
}

#[test]
fn dense_queue_without_a_batch_in_flight_stays_on_interrupts() {
    let mut pol = Policy::new();
    let (action, _) = sample(&mut pol, 0, EVERY, timed(4, LATENCY), 5);
    assert_eq!(action, Action::Stay);
}

#[test]
fn timer_slack_beyond_the_budget_ends_the_episode_as_a_failure() {
    let p = params();
    let (mut pol, now) = polling();
    // The timer fires 20 us late: a poll interval alone exceeds what the budget allows, and
    // whatever the poll saved, it added too much.
    let a = pol.on_timer_idle(
        now + WAIT + 20 * US,
        20 * US,
        timed(26, LATENCY + 13 * US),
        10,
        &p,
    );
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    assert_eq!(pol.estimates().slack_ns, 20 * US);
    assert_eq!(pol.failures(), 1);
}

#[test]
fn a_queue_polls_again_once_the_timer_is_punctual() {
    let p = params();
    let (mut pol, now) = polling();
    // One poll 2 ms late (a loaded host) ends the episode: no wait fits the budget.
    let late = now + WAIT + 2_000 * US;
    let a = pol.on_timer_idle(late, 2_000 * US, timed(22, LATENCY), 24, &p);
    assert!(matches!(
        a,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    ));
    // On interrupts after the backoff nothing measures the timer: its lateness relaxes, and
    // the dense stream is polled again once it is within the 16 us wait the budget allows.
    let until = late + pol.backoff_ns();
    let (action, _) = sample(&mut pol, until, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert!(pol.estimates().slack_ns < 16 * US);
}

#[test]
fn a_device_slower_than_the_idle_floor_is_sampled_and_polled() {
    // 100 ms per command at QD 30: one completion every 3.5 ms, longer than the idle floor.
    let mut pol = Policy::new();
    let slow = timed(1, 100_000 * US);
    let (action, _) = sample(&mut pol, 1_000 * US, 3_500 * US, slow, 30);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert_eq!(pol.estimates().latency_ns, 100_000 * US);
}

#[test]
fn an_idle_gap_forgets_the_failures() {
    let p = params();
    let (mut pol, now) = polling();
    let now = stall(&mut pol, now, 30);
    assert_eq!(pol.failures(), 1);
    // Silence of more than eight latencies (at least IDLE_FLOOR_NS) after the backoff: the
    // queue went idle, and the load that comes next is another; its episodes start afresh,
    // once it took the interrupts the failure still owes.
    let now = now + pol.backoff_ns() + IDLE_FLOOR_NS + 1;
    assert_eq!(
        pol.on_irq_idle(now, timed(4, LATENCY), 32, &p),
        Action::Stay
    );
    assert_eq!(pol.failures(), 0);
    assert_eq!(pol.stage(), Stage::Backoff);
    let now = take_owed_irqs(&mut pol, now);
    // Nothing measured interrupts' rate during the backoff, so the interrupt that ended it
    // opened a sample and the rate is measured again (a warm-up of JUDGE_MIN completions,
    // then BASELINE_MIN) before an episode.
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.estimates().ref_weight, 0);
    let (action, decided) = sample(&mut pol, now, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert_eq!(
        decided,
        now - EVERY + (JUDGE_MIN + BASELINE_MIN) / 4 * EVERY
    );
}

#[test]
fn disabled_policy_never_polls() {
    let mut p = params();
    p.enabled = false;
    let mut pol = Policy::new();
    for i in 0..1000 {
        assert_eq!(
            pol.on_irq_idle(i * US, timed(32, LATENCY), 128, &p),
            Action::Stay
        );
    }
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn the_wait_climbs_toward_the_budget_while_the_rate_holds() {
    let (mut pol, now) = polling();
    // Polls that keep interrupts' rate (a 1 us gap) and add little latency: an open loop.
    let (_, action) = poll_at_rate(&mut pol, now, 200, US, LATENCY);
    assert!(matches!(action, Action::Rearm { .. }), "{action:?}");
    assert!(pol.estimates().rate_x256 > 0);
    assert!(pol.wait_ns() > WAIT, "{}", pol.wait_ns());
}

#[test]
fn a_wait_that_costs_the_completion_rate_shrinks_and_spends_the_credit() {
    let (mut pol, now) = polling();
    // Climb first, as an open loop would.
    let (now, _) = poll_at_rate(&mut pol, now, 200, US, LATENCY);
    let climbed = pol.estimates().rate_x256;
    // Then the rate falls by a tenth (a closed loop paced by the device, the wait adding to
    // its round): the wait comes down, and the loss is charged to the credit until it ends the
    // episode.
    let (_, action) = poll_at_rate(&mut pol, now, 2_000, 1_100, LATENCY);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Spent
        }
    );
    assert!(pol.estimates().rate_x256 < climbed);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn a_load_that_changes_during_an_episode_is_measured_afresh() {
    let (mut pol, now) = polling();
    // The rate doubles (the load grew): no longer comparable with interrupts' rate.
    let (_, action) = poll_at_rate(&mut pol, now, 200, US / 2, LATENCY);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Resample
        }
    );
    assert_eq!(pol.estimates().ref_weight, 0);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn polls_that_add_more_than_the_budget_shorten_the_wait() {
    let p = params();
    let (mut pol, mut now) = polling();
    let before = pol.estimates().fit_x256;
    for _ in 0..4 {
        now += pol.wait_ns();
        // Each completion waited 20 us more than on interrupts: far beyond the budget.
        match pol.on_timer_idle(now, 0, timed(6, 2 * LATENCY), 26, &p) {
            Action::Rearm { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(pol.estimates().fit_x256 < before);
}

#[test]
fn polls_that_add_less_than_the_budget_lengthen_the_wait() {
    let p = params();
    let (mut pol, now) = polling();
    // The wait first climbs to the budget's while the rate holds ...
    let (mut now, _) = poll_at_rate(&mut pol, now, 200, US, LATENCY);
    assert_eq!(pol.estimates().rate_x256, 256);
    let before = pol.estimates().fit_x256;
    for _ in 0..8 {
        let wait = pol.wait_ns();
        now += wait;
        // ... then completions arrive just before each poll: they wait almost nothing.
        let count = (wait / US) as u32;
        let a = pol.on_timer_idle(now, 0, timed(count, LATENCY + US / 10), 26, &p);
        assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
    }
    assert!(pol.estimates().fit_x256 > before);
}

/// Empty polls with `inflight` outstanding until the episode ends. Returns the action that
/// ended it, when, and how many polls that took.
fn starve(pol: &mut Policy, mut now: u64, inflight: u32) -> (Action, u64, u32) {
    let p = params();
    let mut polls = 0;
    loop {
        now += pol.wait_ns();
        polls += 1;
        match pol.on_timer_idle(now, 0, Reaped::default(), inflight, &p) {
            Action::Rearm { .. } => assert!(now < 1_000_000 * US, "never stalled"),
            other => return (other, now, polls),
        }
    }
}

/// [`starve`] until the episode ends, which must be as stalled; returns the time it ended.
fn stall(pol: &mut Policy, now: u64, inflight: u32) -> u64 {
    stall_polls(pol, now, inflight).0
}

/// [`stall`], also returning how many empty polls that took.
fn stall_polls(pol: &mut Policy, now: u64, inflight: u32) -> (u64, u32) {
    let (action, at, polls) = starve(pol, now, inflight);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    (at, polls)
}

#[test]
fn short_silence_with_work_in_flight_is_tolerated() {
    let p = params();
    let (mut pol, now) = polling();
    // 30 in flight at 1 us apart should take 30 us: empty polls up to then are clumping.
    for i in 1..=2 {
        let a = pol.on_timer_idle(now + i * WAIT, 0, Reaped::default(), 30, &p);
        assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
    }
    let a = pol.on_timer_idle(now + 3 * WAIT, 0, timed(18, LATENCY + WAIT / 2), 12, &p);
    assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
}

#[test]
fn silence_longer_than_the_work_in_flight_is_a_stall() {
    let p = params();
    let (mut pol, now) = polling();
    // 44 us of work in flight and one 6 us poll interval tolerated: 50 us of silence, then the
    // ninth poll, 9 waits behind.
    let (_, polls) = stall_polls(&mut pol, now, 44);
    assert_eq!(polls, 9);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.backoff_ns(), 9 * p.backoff_ns);
    assert_eq!(pol.failures(), 1);
}

#[test]
fn nothing_in_flight_is_due_before_one_service_latency() {
    let (mut pol, now) = polling();
    // 3 in flight at the 1 us gap would be 3 us of work, but none completes sooner than the
    // device's 40 us: 40 us and one 6 us poll interval of silence are tolerated.
    let (_, polls) = stall_polls(&mut pol, now, 3);
    assert_eq!(polls, 8);
}

#[test]
fn silence_tolerance_is_capped_for_deep_queues() {
    let (mut pol, now) = polling();
    // 4096 in flight would be 4 ms of work; silence is cut off after 8 latencies (the 1 ms
    // floor before a longer latency is known) and one poll interval.
    let (_, polls) = stall_polls(&mut pol, now, 4096);
    assert_eq!(polls, 168);
    let p = params();
    assert_eq!(
        pol.backoff_ns(),
        (MAX_BEHIND * p.backoff_ns).min(p.backoff_max_ns)
    );
}

#[test]
fn backoff_grows_on_repeated_failures_and_is_capped() {
    let mut pol = Policy::new();
    let mut now = 0;
    let mut backoffs = Vec::new();
    for _ in 0..6 {
        let (action, t) = sample(&mut pol, now, EVERY, timed(4, LATENCY), 32);
        assert!(matches!(action, Action::StartPolling { .. }));
        let t = stall(&mut pol, t, 30);
        backoffs.push(pol.backoff_ns());
        // The backoff holds until it expires.
        now = busy_backoff(&mut pol, t);
    }
    // 8 behind: 8 ms, then doubling per failure, capped at 10 ms.
    assert_eq!(
        backoffs,
        [8_000, 10_000, 10_000, 10_000, 10_000, 10_000].map(|us| us * US)
    );
}

/// Interrupts of the dense stream from `from` while the backoff lasts: it holds for its time,
/// and then until the interrupts a failure owes are taken. Returns the time of the interrupt
/// after the one that ended it.
fn busy_backoff(pol: &mut Policy, from: u64) -> u64 {
    let until = from + pol.backoff_ns();
    let now = take_owed_irqs(pol, from);
    assert!(now > until, "ended at {now}, before {until}");
    now
}

/// Interrupts of the dense stream from `from` until the backoff ends, whenever that is;
/// returns the time of the interrupt after the one that ended it.
fn take_owed_irqs(pol: &mut Policy, from: u64) -> u64 {
    let p = params();
    let mut now = from + EVERY;
    while pol.stage() == Stage::Backoff {
        assert_eq!(
            pol.on_irq_idle(now, timed(4, LATENCY), 32, &p),
            Action::Stay
        );
        now += EVERY;
    }
    now
}

#[test]
fn backoff_expiry_returns_to_sampling() {
    let p = params();
    let (mut pol, now) = polling();
    let t = stall(&mut pol, now, 30);
    let until = busy_backoff(&mut pol, t);
    assert_eq!(
        pol.on_irq_idle(until, timed(4, LATENCY), 32, &p),
        Action::Stay
    );
    assert_eq!(pol.stage(), Stage::Sample);
    let (action, _) = sample(&mut pol, until + EVERY, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
}

/// Polls that each collect what was predicted, `n` of them.
fn keep_up(pol: &mut Policy, now: u64, n: u32) -> u64 {
    let (now, action) = poll_at_rate(pol, now, n, US, LATENCY);
    assert!(matches!(action, Action::Rearm { .. }), "{action:?}");
    now
}

#[test]
fn an_episode_that_paid_off_resets_the_failure_count() {
    let (mut pol, t) = polling();
    let t = stall(&mut pol, t, 30);
    assert_eq!(pol.failures(), 1);
    let t = busy_backoff(&mut pol, t);
    let (action, t) = sample(&mut pol, t, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    // The load stops, and the last poll drains what was in flight.
    let a = pol.on_timer_idle(t + WAIT, 0, timed(32, LATENCY + WAIT / 2), 0, &params());
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.failures(), 0);
}

#[test]
fn idle_after_a_good_episode_returns_straight_to_sampling() {
    let p = params();
    let (mut pol, now) = polling();
    let now = keep_up(&mut pol, now, JUDGE_POLLS);
    // The load stops: the last poll drains what was in flight, and nothing is left to wait
    // for on a CPU that is not busy.
    let a = pol.on_timer_idle(now + WAIT, 0, timed(32, LATENCY + WAIT / 2), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn a_sample_after_an_episode_begins_at_its_first_interrupt() {
    let p = params();
    let (mut pol, now) = polling();
    let now = keep_up(&mut pol, now, JUDGE_POLLS);
    let end = now + WAIT;
    let a = pol.on_timer_idle(end, 0, timed(32, LATENCY + WAIT / 2), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    // A closed loop's application works through what the last poll reaped before it submits
    // again: the first interrupt comes 200 us later, then one every EVERY. That wait is the
    // episode's pace, not interrupts': the sample's rate is theirs alone.
    let first = end + 200 * US;
    for i in 0..4 {
        assert_eq!(
            pol.on_irq_idle(first + i * EVERY, timed(4, LATENCY), 32, &p),
            Action::Stay
        );
    }
    // The fifth ends the sample (which may start an episode).
    let _ = pol.on_irq_idle(first + 4 * EVERY, timed(4, LATENCY), 32, &p);
    assert_eq!(rate_per_sec(pol.estimates().gap_ns), 1_000_000);
}

#[test]
fn a_burst_drained_in_a_few_polls_pays_off() {
    let p = params();
    let (mut pol, now) = polling();
    // Two polls take what eight interrupts of four would have: too few polls to count as kept
    // up, but clearly fewer interrupts.
    let a = pol.on_timer_idle(now + WAIT, 0, timed(10, LATENCY + WAIT / 2), 22, &p);
    assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
    let a = pol.on_timer_idle(now + 2 * WAIT, 0, timed(22, LATENCY + WAIT / 2), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!((pol.backoff_ns(), pol.failures()), (0, 0));
}

#[test]
fn idle_right_after_starting_backs_off() {
    let p = params();
    let (mut pol, now) = polling();
    let a = pol.on_timer_idle(now + WAIT, 0, Reaped::default(), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.backoff_ns(), p.backoff_ns);
}

#[test]
fn an_idle_queue_forgets_its_failed_episodes() {
    let p = params();
    let (mut pol, now) = polling();
    let t = stall(&mut pol, now, 30);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.failures(), 1);
    // Silent for longer than the idle gap (the 1 ms floor), then a new load: no failure
    // counted, and no backoff left but the interrupts the failure owes.
    let until = t + pol.backoff_ns();
    let t = t + 1_001 * US;
    assert!(t < until);
    assert_eq!(pol.on_irq_idle(t, timed(4, LATENCY), 32, &p), Action::Stay);
    assert_eq!(pol.failures(), 0);
    assert_eq!(pol.stage(), Stage::Backoff);
    let t = take_owed_irqs(&mut pol, t);
    let (action, _) = sample(&mut pol, t, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
}

#[test]
fn a_stall_after_polls_that_paid_samples_again_at_once() {
    let (mut pol, now) = polling();
    // Polls for longer than the idle gap, climbing toward the budget's wait: they reap more
    // than interrupts would have for as many interrupts. Then the load pauses.
    let now = keep_up(&mut pol, now, 400);
    stall(&mut pol, now, 30);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!((pol.backoff_ns(), pol.failures()), (0, 0));
}

#[test]
fn episode_is_capped_and_resamples_without_backoff() {
    let mut p = params();
    p.episode_polls = 16;
    let (mut pol, now) = polling();
    let now = keep_up(&mut pol, now, 15);
    let a = pol.on_timer_idle(now + pol.wait_ns(), 0, timed(6, LATENCY + WAIT / 2), 26, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Capped
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn switching_adaptive_off_ends_polling_at_the_next_poll() {
    let mut p = params();
    let (mut pol, now) = polling();
    p.enabled = false;
    let a = pol.on_timer_idle(now + WAIT, 0, timed(6, LATENCY), 26, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Disabled
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(
        pol.on_irq_idle(now + 20 * US, timed(8, LATENCY), 24, &p),
        Action::Stay
    );
}

#[test]
fn interrupt_while_polling_changes_nothing() {
    let p = params();
    let (mut pol, now) = polling();
    assert_eq!(
        pol.on_irq_idle(now + US, timed(4, LATENCY), 32, &p),
        Action::Stay
    );
    assert_eq!(pol.stage(), Stage::Poll);
    let a = pol.on_timer_idle(now + WAIT, 0, timed(6, LATENCY + WAIT / 2), 26, &p);
    assert!(matches!(a, Action::Rearm { .. }));
}

#[test]
fn timer_outside_polling_never_leaves_the_vector_masked() {
    let p = params();
    let mut pol = Policy::new();
    assert_eq!(
        pol.on_timer_idle(10, 0, Reaped::default(), 0, &p),
        Action::StopPolling {
            ending: Ending::Disabled
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn abort_polling_reports_whether_the_vector_was_masked() {
    let (mut pol, _) = polling();
    assert!(pol.abort_polling());
    assert_eq!(pol.stage(), Stage::Sample);
    assert!(!pol.abort_polling());
}

#[test]
fn poll_waits_respect_the_minimum() {
    let mut pol = Policy::new();
    // 4 completions every 250 ns after 5 us each: a 62.5 ns gap; the paying batch of 6 would
    // take 375 ns, raised to 1 us.
    let (action, _) = sample(&mut pol, 0, 250, timed(4, 5 * US), 256);
    assert_eq!(
        action,
        Action::StartPolling {
            wait_ns: MIN_WAIT_NS
        }
    );
}

/// The stream of a closed loop paced by a busy CPU: 4 completions every 4 us after 5 us in
/// the device, at most 12 in flight (the application holds the rest), interrupts reaping 4
/// each. Its latency budget (half a microsecond) fits no poll.
const CPU_LATENCY: u64 = 5 * US;

#[test]
fn a_busy_cpu_probes_beyond_the_latency_budget() {
    let mut pol = Policy::new();
    let (action, _) = sample_on(&mut pol, 0, EVERY, timed(4, CPU_LATENCY), 12, true);
    // Twice what an interrupt reaps: 8 completions, an 8 us wait.
    assert_eq!(action, Action::StartPolling { wait_ns: 8 * US });
    assert_eq!(pol.estimates().busy_percent, 100);
}

#[test]
fn an_idle_cpu_never_probes() {
    let mut pol = Policy::new();
    let (action, _) = sample_on(&mut pol, 0, EVERY, timed(4, CPU_LATENCY), 12, false);
    assert_eq!(action, Action::Stay);
}

/// The busy CPU's stream sampled until it probes: when, and the policy.
fn busy_cpu_probe() -> (u64, Policy) {
    let mut pol = Policy::new();
    let (action, now) = sample_on(&mut pol, 0, EVERY, timed(4, CPU_LATENCY), 12, true);
    assert!(matches!(action, Action::StartPolling { .. }));
    (now, pol)
}

/// A probe on the busy CPU's stream, polled `polls` times at a gap of `gap` between
/// completions; returns the policy, the time and the last action.
fn probe(gap: u64, polls: u32) -> (Policy, u64, Action) {
    let (now, mut pol) = busy_cpu_probe();
    let (now, action) = poll_at_rate(&mut pol, now, polls, gap, CPU_LATENCY);
    (pol, now, action)
}

#[test]
fn a_probe_that_beats_interrupts_is_confirmed_then_polls_paced_by_the_cpu() {
    // A fifth faster than interrupts (an 800 ns gap against 1 us).
    let (mut pol, now, action) = probe(800, 1_000);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Resample
        }
    );
    assert!(
        !pol.paced_by_cpu(),
        "not before interrupts' rate is measured again"
    );
    // On the saturated CPU the probe climbed from twice an interrupt's batch (8 us) as far as
    // it may.
    let wait_ns = pol.wait_ns();
    assert!(wait_ns > 8 * US, "{wait_ns}");
    // Interrupts' rate measured afresh is still the 1 us gap: the gain holds, and the queue
    // polls again at the probe's wait, no longer held to the latency budget.
    let (action, _) = sample_on(&mut pol, now, EVERY, timed(4, CPU_LATENCY), 12, true);
    assert_eq!(action, Action::StartPolling { wait_ns });
    assert!(pol.paced_by_cpu());
}

#[test]
fn a_gain_that_was_the_load_growing_is_not_taken() {
    let (start, _) = busy_cpu_probe();
    let (mut pol, now, _) = probe(800, 1_000);
    let p = params();
    // Measured afresh, interrupts are as fast as the probe was: the load had grown.
    let mut t = now;
    while pol.stage() == Stage::Sample {
        let action = pol.on_irq(t, timed(4, CPU_LATENCY), 12, &p, || Some(0));
        assert_eq!(action, Action::Stay);
        t += 3_200;
    }
    assert!(!pol.paced_by_cpu());
    // The probe failed: the queue backs off for at least PROBE_BACKOFF_FACTOR times its length.
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.failures(), 1);
    let probe_length = now - start;
    assert_eq!(
        pol.backoff_ns(),
        (PROBE_BACKOFF_FACTOR * probe_length).clamp(p.backoff_ns, p.backoff_max_ns)
    );
}

#[test]
fn a_probe_that_loses_half_the_rate_fails_at_once() {
    // A 2.5 us gap against interrupts' 1 us: it fails as soon as interrupts would have
    // brought a window's JUDGE_MIN completions, not after the twice as many a gain is judged
    // over.
    let (start, _) = busy_cpu_probe();
    let (pol, now, action) = probe(2_500, 100);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    assert!(now - start < JUDGE_MIN * US + 8 * US, "{}", now - start);
    assert_eq!(pol.failures(), 1);
    assert!(pol.backoff_ns() >= params().backoff_ns);
}

/// A queue polling paced by the CPU (see above).
fn paced_by_cpu() -> (Policy, u64) {
    let (mut pol, now, _) = probe(800, 1_000);
    let (action, now) = sample_on(&mut pol, now, EVERY, timed(4, CPU_LATENCY), 12, true);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert!(pol.paced_by_cpu());
    (pol, now)
}

#[test]
fn paced_by_the_cpu_the_wait_climbs_while_the_rate_improves() {
    let (mut pol, now) = paced_by_cpu();
    let start = pol.wait_ns();
    // The longer the wait, the fewer timer interrupts and the faster the loop (an 800 ns gap
    // at 8 us, 500 from 32 us), and the CPU stays saturated: the wait keeps climbing.
    let p = params();
    let mut now = now;
    let mut carried = 0;
    for _ in 0..60 {
        let wait = pol.wait_ns();
        now += wait;
        let gap = 900u64.saturating_sub(wait / 80).max(500);
        carried += wait;
        let count = carried / gap;
        carried -= count * gap;
        // The CPU stays saturated: the time saved went to the application.
        let a = pol.on_timer(now, 0, timed(count as u32, CPU_LATENCY), 12, &p, || Some(0));
        assert!(
            matches!(a, Action::Rearm { .. }),
            "{a:?} at wait {wait} gap {gap}"
        );
    }
    assert!(pol.wait_ns() > start, "{} not above {start}", pol.wait_ns());
}

#[test]
fn paced_by_the_cpu_an_episode_no_faster_than_interrupts_loses_the_gain() {
    let (mut pol, now) = paced_by_cpu();
    // The rate falls below interrupts' (the CPU no longer sets the pace): after a few windows
    // no faster, the queue backs off as from a failed probe.
    let (t, action) = poll_at_rate(&mut pol, now, 1_000, 1_050, CPU_LATENCY);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    assert!(!pol.paced_by_cpu());
    assert_eq!(pol.stage(), Stage::Backoff);
    // However much its polls reaped, and however long it polled without an interrupt: the
    // interrupts that come during the backoff do not end it.
    busy_backoff(&mut pol, t);
}

#[test]
fn paced_by_the_cpu_a_gain_is_confirmed_again_against_a_fresh_sample() {
    // Episodes as long as the defaults allow: the gain, not the cap on polls, ends this one.
    let p = Params {
        episode_polls: crate::defaults().episode_polls,
        ..params()
    };
    // Interrupts as fast as when the gain was confirmed, or twice as fast (the host sped up).
    for (irq_every, holds) in [(EVERY, true), (EVERY / 2, false)] {
        let (mut pol, now) = paced_by_cpu();
        // The gain holds (an 800 ns gap against interrupts' 1 us) until it has reaped enough
        // to be confirmed again: the queue samples interrupts afresh.
        let (end, action) = poll_at_rate_with(&mut pol, now, u32::MAX, 800, CPU_LATENCY, &p);
        assert_eq!(
            action,
            Action::StopPolling {
                ending: Ending::Resample
            }
        );
        let reaped = (end - now) / 800;
        assert!(
            (RECONFIRM_COMPLETIONS..RECONFIRM_COMPLETIONS + RECONFIRM_COMPLETIONS / 16)
                .contains(&reaped),
            "{reaped}"
        );
        // The gain goes on only if it still beats interrupts.
        let (action, _) = sample_on(&mut pol, end, irq_every, timed(4, CPU_LATENCY), 12, true);
        assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
        assert_eq!(pol.paced_by_cpu(), holds, "interrupts every {irq_every} ns");
    }
}

#[test]
fn paced_by_the_cpu_a_gain_that_covers_its_loss_samples_again_at_once() {
    let (mut pol, now) = paced_by_cpu();
    // The gain holds for a while (an 800 ns gap against interrupts' 1 us) ...
    let (now, action) = poll_at_rate(&mut pol, now, 45, 800, CPU_LATENCY);
    assert!(matches!(action, Action::Rearm { .. }), "{action:?}");
    // ... then a window at less than half the rate (a busy host) loses it. It held long enough
    // to have earned what that window can have cost: the queue samples again at once, with no
    // failure counted.
    let (_, action) = poll_at_rate(&mut pol, now, 1_000, 2_500, CPU_LATENCY);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    assert!(!pol.paced_by_cpu());
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.failures(), 0);
}

#[test]
fn where_interrupts_reap_most_completions_polls_may_add_more_than_the_budget() {
    let mut pol = Policy::new();
    // A 20 us device: the budget's 2 us allows a 4 us wait, shorter than the 6 us a paying
    // poll takes. But the budget is a mean over all completions, and interrupts reaped them
    // all so far: polls may add up to twice the budget.
    let (action, now) = sample(&mut pol, 0, EVERY, timed(4, 20 * US), 32);
    assert_eq!(action, Action::StartPolling { wait_ns: WAIT });
    // As polls reap a growing share, the budget they may add shrinks toward the budget alone,
    // where the paying wait no longer fits: the episode ends.
    let (_, action) = poll_at_rate(&mut pol, now, 2_000, US, 20 * US);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    let est = pol.estimates();
    assert!(est.recent_polled * 2 > est.recent_total, "{est:?}");
}

#[test]
fn a_reference_measured_across_a_depth_change_is_measured_afresh() {
    let p = params();
    let mut pol = Policy::new();
    // At depth 8 for a while (one completion every 4 us) ...
    let mut now = 0;
    for _ in 0..200 {
        pol.on_irq_idle(now, timed(1, LATENCY), 7, &p);
        now += 4 * US;
    }
    let depth8 = pol.estimates().ref_depth_x16;
    assert_eq!(depth8, 8 * 16);
    // ... then at depth 32, four times the rate. Samples at the new depth blend into the
    // reference until the depth's moving average shows the change; an episode judged against
    // such a reference finds the rate far from it and resamples.
    let (action, now) = sample(&mut pol, now, EVERY, timed(4, LATENCY), 28);
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
    let (now, action) = poll_at_rate(&mut pol, now, 100, US, LATENCY);
    if let Action::StopPolling { ending } = action {
        assert_eq!(ending, Ending::Resample);
        let (action, _) = sample(&mut pol, now, EVERY, timed(4, LATENCY), 28);
        assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
    }
    // Either way the reference the episode is judged by is the new load's.
    let est = pol.estimates();
    assert_eq!(est.ref_depth_x16, 32 * 16);
    assert_eq!(rate_per_sec(est.ref_gap_ns), 1_000_000);
}

#[test]
fn param_specs_are_consistent() {
    for spec in PARAM_SPECS {
        assert!(
            spec.min <= spec.default && spec.default <= spec.max,
            "{}",
            spec.name
        );
        assert!(spec.accepts(spec.default));
        assert!(!spec.accepts(spec.max.wrapping_add(1)) || spec.max == u32::MAX);
        assert!(spec.min == 0 || !spec.accepts(spec.min - 1));
    }
    let d = crate::defaults();
    assert!(d.enabled);
    assert_eq!(
        d.max_delay_ns,
        u64::from(PARAM_SPECS[param::MAX_DELAY_US].default) * 1000
    );
    assert!(d.backoff_ns <= d.backoff_max_ns);
    assert!(u64::from(PARAM_SPECS[param::MAX_DELAY_US].min) * 1000 >= MIN_WAIT_NS);
}
