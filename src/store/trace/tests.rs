//! The store trace's validation, on hand-written traces against library models.

use super::*;

/// The library model `models/NAME.toml`.
fn library(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/{name}.toml"));
    Scenario::load(&path).expect("the library model loads")
}

/// `lines` as a trace file holds them.
fn text(lines: &[TraceLine]) -> String {
    lines.iter().map(|l| serde_json::to_string(l).expect("a line serializes") + "\n").collect()
}

/// A trace of 100 ms ticks with a tick of slack: `faults`, then `body`, ending at 20 s.
fn trace(faults: &[(u64, TraceFault)], body: impl IntoIterator<Item = TraceLine>) -> String {
    let header = TraceLine::StoreTrace { ms_per_tick: 100, slack_ms: Some(100) };
    let faults = faults.iter().map(|(at_ms, fault)| TraceLine::Fault { at_ms: *at_ms, fault: fault.clone() });
    let lines: Vec<TraceLine> =
        [header].into_iter().chain(faults).chain(body).chain([TraceLine::End { at_ms: 20_000 }]).collect();
    text(&lines)
}

mod requests {
    use super::*;

    /// A trace of requests to `node` (each `(sent_ms, delivered_ms)`), beside `faults`, ending
    /// at 20 s, validated against the remirror-storm model (100 ms ticks, 100 ms links).
    fn judge(node: NodeId, requests: &[(u64, Option<u64>)], faults: &[(u64, TraceFault)]) -> TraceVerdict {
        let mut body = Vec::new();
        for (id, (sent, delivered)) in requests.iter().enumerate() {
            let id = id as u64 + 1;
            body.push(TraceLine::Send { at_ms: *sent, id, node, msg: "ping".into(), coordinator: 0 });
            body.extend(delivered.map(|at_ms| TraceLine::Deliver { at_ms, id }));
        }
        validate(&library("remirror-storm"), &trace(faults, body)).expect("a well-formed trace")
    }

    #[test]
    fn a_crash_excuses_losses_only_until_the_node_restarts() {
        let crash = [(1_000, TraceFault::Crash { node: 1 }), (3_000, TraceFault::Restart { node: 1 })];
        let during = judge(1, &[(2_000, None)], &crash);
        assert!(matches!(during, TraceVerdict::Conforms { lost: 1, .. }), "{during:?}");
        // Sent before the restart, its reply due after it: the node was down when it arrived.
        let across = judge(1, &[(2_900, None)], &crash);
        assert!(matches!(across, TraceVerdict::Conforms { lost: 1, .. }), "{across:?}");
        let after = judge(1, &[(4_000, None)], &crash);
        assert!(matches!(after, TraceVerdict::Diverges { .. }), "{after:?}");
        // Without the restart the crash lasts to the end.
        let endless = judge(1, &[(4_000, None)], &crash[..1]);
        assert!(matches!(endless, TraceVerdict::Conforms { lost: 1, .. }), "{endless:?}");
    }

    #[test]
    fn a_cut_excuses_losses_on_its_zones_links_only_while_it_lasts() {
        let cut = [(1_000, TraceFault::Partition { zone: 1 }), (2_000, TraceFault::Healed { zone: 1 })];
        let during = judge(1, &[(1_500, None)], &cut);
        assert!(matches!(during, TraceVerdict::Conforms { lost: 1, .. }), "{during:?}");
        let after = judge(1, &[(2_500, None)], &cut);
        assert!(matches!(after, TraceVerdict::Diverges { .. }), "{after:?}");
        // n1 is in zone a, on the coordinator's side of the cut.
        let other_side = judge(0, &[(1_500, None)], &cut);
        assert!(matches!(other_side, TraceVerdict::Diverges { .. }), "{other_side:?}");
    }

    #[test]
    fn an_ended_fault_that_the_model_does_not_list_is_refused() {
        let text = trace(&[(5, TraceFault::Restored { index: 0 })], []);
        let err = validate(&library("remirror-storm"), &text).unwrap_err();
        assert!(err.contains("line 2") && err.contains("no degrade fault 0"), "{err}");
    }
}

mod one_way_tests {
    use super::*;
    use Endpoint::Node;
    const COORDINATOR: Endpoint = Endpoint::Coordinator(0);

    /// A leader-family trace of messages (`(from, to, sent_ms, delivered_ms)`) beside `faults`,
    /// ending at 20 s, validated against unfenced-primary: n1 in zone a, n2 in b, the
    /// coordinator in c, 100 ms ticks and links, the a-c link degradable to 600 ms.
    fn judge(
        messages: &[(Endpoint, Endpoint, u64, Option<u64>)],
        faults: &[(u64, TraceFault)],
    ) -> TraceVerdict {
        let mut body = Vec::new();
        for (id, &(from, to, sent, delivered)) in messages.iter().enumerate() {
            let id = id as u64 + 1;
            body.push(TraceLine::Message { at_ms: sent, id, from, to, msg: "append".into() });
            body.extend(delivered.map(|at_ms| TraceLine::Deliver { at_ms, id }));
        }
        validate(&library("unfenced-primary"), &trace(faults, body)).expect("a well-formed trace")
    }

    #[test]
    fn a_message_takes_its_own_links_latency_one_way() {
        let on_time = judge(&[(Node(0), Node(1), 1_000, Some(1_190))], &[]);
        assert!(matches!(on_time, TraceVerdict::Conforms { messages: 1, round_trips: 0, .. }), "{on_time:?}");
        // One way, not a round trip: 250 ms is beyond 100 ms and the slack.
        let late = judge(&[(Node(0), Node(1), 1_000, Some(1_250))], &[]);
        let TraceVerdict::Diverges { line, why } = late else { panic!("{late:?}") };
        assert_eq!(line, 2);
        assert!(why.contains("the append n1 sent to n2 at 1000 ms arrived after 250 ms"), "{why}");
        // The degraded a-c link slows n1 and the coordinator, not n1 and n2.
        let degrade = [(500, TraceFault::Degrade { index: 0 })];
        let slow = judge(&[(Node(0), COORDINATOR, 1_000, Some(1_650))], &degrade);
        assert!(matches!(slow, TraceVerdict::Conforms { .. }), "{slow:?}");
        let elsewhere = judge(&[(Node(0), Node(1), 1_000, Some(1_650))], &degrade);
        assert!(matches!(elsewhere, TraceVerdict::Diverges { .. }), "{elsewhere:?}");
    }

    #[test]
    fn a_message_is_lost_only_where_its_receiver_or_its_link_loses_it() {
        let crash = [(1_000, TraceFault::Crash { node: 1 }), (3_000, TraceFault::Restart { node: 1 })];
        let to_crashed = judge(&[(Node(0), Node(1), 2_000, None)], &crash);
        assert!(matches!(to_crashed, TraceVerdict::Conforms { lost: 1, .. }), "{to_crashed:?}");
        // The model delivers what a node sent before it crashed.
        let from_crashed = judge(&[(Node(1), Node(0), 990, None)], &crash);
        let TraceVerdict::Diverges { why, .. } = from_crashed else { panic!("{from_crashed:?}") };
        assert!(why.contains("never reached n1's machine"), "{why}");
        // A restarted coordinator is a new process: what was on its way to it is gone; what it
        // sent is not.
        let restart = [(1_050, TraceFault::CoordinatorRestart)];
        let to_it = judge(&[(Node(0), COORDINATOR, 1_000, None)], &restart);
        assert!(matches!(to_it, TraceVerdict::Conforms { lost: 1, .. }), "{to_it:?}");
        let from_it = judge(&[(COORDINATOR, Node(0), 1_000, None)], &restart);
        assert!(matches!(from_it, TraceVerdict::Diverges { .. }), "{from_it:?}");
        // A cut of zone b separates n2 from n1 and from the coordinator, not n1 from it.
        let cut = [(1_000, TraceFault::Partition { zone: 1 }), (2_000, TraceFault::Healed { zone: 1 })];
        let across = judge(&[(Node(0), Node(1), 1_500, None)], &cut);
        assert!(matches!(across, TraceVerdict::Conforms { lost: 1, .. }), "{across:?}");
        let same_side = judge(&[(Node(0), COORDINATOR, 1_500, None)], &cut);
        assert!(matches!(same_side, TraceVerdict::Diverges { .. }), "{same_side:?}");
    }
}

mod impossible_tests {
    use super::*;

    /// A message n1 -> n2 sent at 1 s and delivered at `delivered_ms`, beside `faults`.
    fn judge(delivered_ms: Option<u64>, faults: &[(u64, TraceFault)]) -> Result<TraceVerdict, String> {
        let (from, to) = (Endpoint::Node(0), Endpoint::Node(1));
        let sent = TraceLine::Message { at_ms: 1_000, id: 1, from, to, msg: "append".into() };
        let delivered = delivered_ms.map(|at_ms| TraceLine::Deliver { at_ms, id: 1 });
        validate(&library("unfenced-primary"), &trace(faults, [sent].into_iter().chain(delivered)))
    }

    fn why(verdict: Result<TraceVerdict, String>) -> String {
        match verdict {
            Ok(TraceVerdict::Diverges { why, .. }) => why,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_delivery_the_models_network_could_not_make_is_named() {
        let before = why(judge(Some(900), &[]));
        assert!(before.contains("delivered at 900 ms, before it was sent"), "{before}");
        let crashed = [(1_050, TraceFault::Crash { node: 1 })];
        let to_crashed = why(judge(Some(1_080), &crashed));
        assert!(to_crashed.contains("reached n2's machine at 1080 ms, while n2 was crashed"), "{to_crashed}");
        let cut = [(1_050, TraceFault::Partition { zone: 1 })];
        let across = why(judge(Some(1_080), &cut));
        assert!(across.contains("while zone b was cut off"), "{across}");
        let sender_down = [(500, TraceFault::Crash { node: 0 })];
        assert!(why(judge(Some(1_080), &sender_down)).contains("n1 sent it while crashed"));
        // A heal resets the quorum family's connections; the machines' messages go on.
        let heal = [(1_050, TraceFault::Heal)];
        assert!(matches!(judge(None, &heal), Ok(TraceVerdict::Diverges { .. })));
        assert!(matches!(judge(Some(1_080), &heal), Ok(TraceVerdict::Conforms { messages: 1, .. })));
        // But a crash the heal ends after the message left was in force when it left.
        let crash_healed = [(500, TraceFault::Crash { node: 1 }), (1_050, TraceFault::Heal)];
        assert!(matches!(judge(None, &crash_healed), Ok(TraceVerdict::Conforms { lost: 1, .. })));
    }

    #[test]
    fn a_second_delivery_is_named_with_the_first() {
        let text = text(&[
            TraceLine::StoreTrace { ms_per_tick: 100, slack_ms: None },
            TraceLine::Message {
                at_ms: 1,
                id: 7,
                from: Endpoint::Node(0),
                to: Endpoint::Node(1),
                msg: "ping".into(),
            },
            TraceLine::Deliver { at_ms: 50, id: 7 },
            TraceLine::Deliver { at_ms: 60, id: 7 },
            TraceLine::End { at_ms: 100 },
        ]);
        let err = validate(&library("unfenced-primary"), &text).unwrap_err();
        assert_eq!(err, "line 4: 7 was delivered already, on line 3");
    }

    #[test]
    fn the_writer_stops_at_the_end_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let writer = TraceWriter::create(&path, 100, 100, Instant::now()).unwrap();
        writer.fault(TraceFault::Drop);
        writer.line(&TraceLine::End { at_ms: 5 });
        writer.fault(TraceFault::Heal);
        writer.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.ends_with("{\"end\":{\"at_ms\":5}}\n"), "{text}");
    }
}

mod several_coordinators_tests {
    use super::*;

    /// A request from coordinator `c` to n2 (zone b), sent at 1 s and answered `took_ms` later,
    /// while ack-timeout-staged-rollout's a-b link is degraded (300-700 ms): ca is in zone a,
    /// cb in zone b beside n2.
    fn judge(c: u8, took_ms: u64) -> TraceVerdict {
        let body = [
            TraceLine::Send { at_ms: 1_000, id: 1, node: 1, msg: "replicate".into(), coordinator: c },
            TraceLine::Deliver { at_ms: 1_000 + took_ms, id: 1 },
        ];
        let text = trace(&[(500, TraceFault::Degrade { index: 0 })], body);
        validate(&library("ack-timeout-staged-rollout"), &text).expect("a well-formed trace")
    }

    #[test]
    fn each_coordinators_requests_are_judged_on_the_link_from_its_zone() {
        assert!(matches!(judge(0, 1_000), TraceVerdict::Conforms { round_trips: 1, .. }));
        let TraceVerdict::Diverges { why, .. } = judge(1, 1_000) else { panic!("{:?}", judge(1, 1_000)) };
        assert!(why.contains("sent to n2 at 1000 ms came back after 1000 ms"), "{why}");
        assert!(why.contains("at most 200 ms"), "{why}");
        // A trace of one coordinator names none: the lines of older traces still read.
        let line = serde_json::to_string(&TraceLine::Send {
            at_ms: 1,
            id: 1,
            node: 0,
            msg: "ping".into(),
            coordinator: 0,
        });
        assert_eq!(line.unwrap(), r#"{"send":{"at_ms":1,"id":1,"node":0,"msg":"ping"}}"#);
    }
}

/// A header out of range is refused by name: a time scale of 0, or one or a slack so large
/// that the bounds' arithmetic wrapped (a message due at "0 ms" was named as never arriving).
#[test]
fn a_header_out_of_range_is_refused() {
    let scenario = library("remirror-storm");
    let with = |ms_per_tick: u64, slack_ms: Option<u64>| {
        let body = [TraceLine::Send { at_ms: 5, id: 1, node: 0, msg: "replicate".into(), coordinator: 0 }];
        let mut lines = vec![TraceLine::StoreTrace { ms_per_tick, slack_ms }];
        lines.extend(body);
        lines.push(TraceLine::End { at_ms: 100_000 });
        validate(&scenario, &text(&lines))
    };
    assert_eq!(with(0, None).unwrap_err(), "line 1: ms_per_tick = 0: must be 1 to 10000");
    assert!(with(1 << 63, None).unwrap_err().contains("ms_per_tick = 9223372036854775808"));
    assert!(with(100, Some(u64::MAX)).unwrap_err().contains("slack_ms = 18446744073709551615"));
    // An hour of slack covers a message still in flight at the end.
    assert!(matches!(with(100, Some(3_600_000)), Ok(TraceVerdict::Conforms { open: 1, .. })));
}
