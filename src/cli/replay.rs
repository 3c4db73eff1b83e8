//! `store sim --replay` and `store run --replay`, the model's side: the counterexample to
//! replay (the one `check` finds for a property, or the first in a `check --format json`
//! report) and its plan for the store's environment (`store::sim::replay::Plan`). The store
//! does not explore models itself (it sits beside the checker, not above it): the CLI hands it
//! this planner, as it hands `store run` the model's verdicts.

use crate::check::{self, RunOptions};
use crate::config::{PropertyName, Scenario};
use crate::model::{display, Action, Endpoint, Msg, World, WorldState};
use crate::store::run::{menu, Fault, Step};
use crate::store::sim::replay::{kind, timer_kind, ClientStep, Fate, Moment, Plan, Planned};
use crate::store::sim::{Replay, ReplayQuery};
use stateright::Model;
use std::collections::BTreeMap;
use std::path::Path;

/// A lasso's loop is played this many times: a livelock the store shares repeats in it.
const LOOP_PLAYS: usize = 3;

/// The replay `query` asks for: its counterexample and its plan.
pub fn plan_replay(query: &ReplayQuery) -> Result<Replay, String> {
    let world = check::world_of(query.model, query.policy, query.label).map_err(|e| e.to_string())?;
    let (property, init, mut actions, loop_from) = if Path::new(query.replay).is_file() {
        // `check --policy FILE` names its run "policy FILE".
        let run = match query.policy {
            Some(_) => format!("policy {}", query.label),
            None => query.label.to_string(),
        };
        from_file(&world, Path::new(query.replay), &query.scenario.name, &run)?
    } else {
        counterexample_for(query)?
    };
    let looped = loop_from.map(|from| {
        let body: Vec<_> = actions[from - 1..].to_vec();
        for _ in 1..LOOP_PLAYS {
            actions.extend(body.iter().cloned());
        }
        (from, from - 1 + body.len(), LOOP_PLAYS)
    });
    let mut plan = plan_of(&world, query.scenario, init, &actions)?;
    plan.looped = looped;
    Ok(Replay { property, steps: actions.len(), looped, plan })
}

/// The counterexample `check` finds for the property `query.replay` names: the property, the
/// initial state, the actions and the step its loop starts at (a lasso's).
fn counterexample_for(
    query: &ReplayQuery,
) -> Result<(PropertyName, usize, Vec<Action>, Option<usize>), String> {
    let property = query.replay;
    let scenario = query.scenario;
    let name =
        PropertyName::parse(property).filter(|p| scenario.properties.contains(p)).ok_or_else(|| {
            let names: Vec<&str> = scenario.properties.iter().map(|p| p.as_str()).collect();
            format!(
                "--replay {property}: not a property of {} (its properties: {}), nor an existing file",
                query.model.display(),
                names.join(", ")
            )
        })?;
    // SIGINT/SIGTERM stops this exploration too.
    let opts = RunOptions { stop: Some(&check::terminal::STOP), ..RunOptions::default() };
    let checked = check::run_one(query.model, query.policy, query.label, &opts).map_err(|e| e.to_string())?;
    let result = checked.properties.iter().find(|p| p.name == name).expect("the model checks its properties");
    let Some(cx) = result.counterexample.as_ref() else {
        return Err(format!(
            "--replay {property}: the model finds no violation of it ({}): there is no counterexample to replay",
            match result.found {
                check::Found::Holds => "it holds",
                _ => "exploration did not complete",
            }
        ));
    };
    Ok((name, cx.path.0, cx.path.1.clone(), cx.loop_from_step))
}

/// The plan of `actions` taken from the world's initial state `init` (a lasso's loop is
/// given repeated as often as it should be played): the moment of each step, what became of
/// each message the trace sent, each client's invocations and retries, each fault and rollout
/// step.
pub fn plan_of(world: &World, scenario: &Scenario, init: usize, actions: &[Action]) -> Result<Plan, String> {
    let scenario_menu: Vec<Fault> = menu(scenario).into_iter().flatten().collect();
    let mut state: WorldState = world.init_states().into_iter().nth(init).ok_or_else(|| {
        format!("the counterexample starts at initial state {init}, which the model does not have")
    })?;
    let mut plan = Plan::new(scenario);
    // Per (sender, receiver, message): the indices of `messages` still travelling, oldest first.
    let mut open: BTreeMap<(Endpoint, Endpoint, Msg), Vec<usize>> = BTreeMap::new();
    for e in &state.net {
        let i = plan.messages.len();
        plan.messages.push(Planned {
            src: e.src,
            dst: e.dst,
            kind: kind(&e.msg),
            sent_step: 0,
            sent: Moment { tick: 0, order: 0 },
            fate: Fate::InFlight,
            empty_copy: empty_copy(&e.msg),
        });
        open.entry((e.src, e.dst, e.msg)).or_default().push(i);
    }
    let (mut tick, mut order) = (0u64, 0u32);
    let mut before = in_flight(&state);
    for (index, action) in actions.iter().enumerate() {
        let step = index + 1;
        let mut enabled = Vec::new();
        world.actions(&state, &mut enabled);
        if !enabled.contains(action) {
            return Err(format!(
                "step {step} ({}) is not a step of the model here",
                display::action(&world.cfg, action)
            ));
        }
        let next = world
            .next_state(&state, action.clone())
            .ok_or_else(|| format!("step {step} has no next state"))?;
        let at = Moment { tick, order };
        if *action == Action::Tick {
            tick += 1;
            order = 0;
        } else {
            order += 1;
            let mut text = display::action(&world.cfg, action);
            let changes = display::topology_changes(&world.cfg, &state, &next);
            if !changes.is_empty() {
                text.push_str(&format!(" => {changes}"));
            }
            plan.steps.push((step, at, text));
        }
        // What left the network, and what joined it.
        let after = in_flight(&next);
        for (key, n) in &before {
            let left = n.saturating_sub(after.get(key).copied().unwrap_or(0));
            for k in 0..left {
                let Some(i) = open.get_mut(key).filter(|v| !v.is_empty()).map(|v| v.remove(0)) else {
                    break;
                };
                let this = k == 0
                    && match action {
                        Action::Deliver(e) | Action::Lose(e) => (e.src, e.dst, e.msg) == *key,
                        _ => false,
                    };
                plan.messages[i].fate = match action {
                    Action::Deliver(_) if this => Fate::Delivered { step, at },
                    Action::Lose(_) if this => {
                        // The drop fault is on from the tick the lost message left in (the
                        // store's trace is judged so); the plan loses the message itself.
                        let tick = plan.messages[i].sent.tick;
                        plan.env.push((Moment { tick, order: 0 }, Step::Fault(Fault::Drop)));
                        Fate::Lost { step }
                    }
                    _ => Fate::Vanished,
                };
            }
        }
        for (key, n) in &after {
            let joined = n.saturating_sub(before.get(key).copied().unwrap_or(0));
            for _ in 0..joined {
                let i = plan.messages.len();
                plan.messages.push(Planned {
                    src: key.0,
                    dst: key.1,
                    kind: kind(&key.2),
                    sent_step: step,
                    sent: at,
                    fate: Fate::InFlight,
                    empty_copy: empty_copy(&key.2),
                });
                open.entry(*key).or_default().push(i);
            }
        }
        if let Some((coord, timer)) = action.coordinator_timer() {
            plan.timers.push((coord, tick, timer_kind(&timer)));
        }
        match *action {
            Action::ClientInvoke(c) => plan.clients[usize::from(c)].push((at, ClientStep::Invoke)),
            Action::ClientRetry(c) => plan.clients[usize::from(c)].push((at, ClientStep::Retry)),
            Action::Crash(n) => plan.env.push((at, Step::Fault(Fault::Crash(n)))),
            Action::Restart(n) => plan.env.push((at, Step::End(Fault::Crash(n)))),
            Action::Partition(z) => plan.env.push((at, Step::Fault(Fault::Partition(z)))),
            Action::Heal(z) => plan.env.push((at, Step::End(Fault::Partition(z)))),
            Action::Degrade(i) => plan.env.push((at, Step::Fault(degrade(&scenario_menu, i)?))),
            Action::Restore(i) => plan.env.push((at, Step::End(degrade(&scenario_menu, i)?))),
            Action::CoordinatorRestart => plan.env.push((at, Step::Fault(Fault::CoordinatorCrash))),
            Action::BurstEnds(_) if plan.cannot.is_none() => {
                let why = "the store's burst never ends (its background load runs for the whole run)";
                plan.cannot = Some((step, why.to_string()));
            }
            Action::Upgrade(c) | Action::Rollback(c) => {
                plan.env.push((at, Step::Rollout(plan.stages.len())));
                plan.stages.push((c, usize::from(next.stage(c))));
            }
            _ => {}
        }
        state = next;
        before = after;
    }
    plan.env.sort_by_key(|(at, step)| (*at, step.rank()));
    plan.end_tick = tick + 1;
    Ok(plan)
}

/// The messages in flight in `s`, counted by sender, receiver and message.
fn in_flight(s: &WorldState) -> BTreeMap<(Endpoint, Endpoint, Msg), usize> {
    let mut m: BTreeMap<(Endpoint, Endpoint, Msg), usize> = BTreeMap::new();
    for e in &s.net {
        *m.entry((e.src, e.dst, e.msg)).or_default() += 1;
    }
    m
}

fn degrade(menu: &[Fault], index: u8) -> Result<Fault, String> {
    menu.iter()
        .find(|f| matches!(f, Fault::Degrade { index: i, .. } if *i == index))
        .cloned()
        .ok_or_else(|| format!("degradation {index} is not on the fault menu"))
}

fn empty_copy(msg: &Msg) -> bool {
    matches!(msg, Msg::CopyData { data, .. } if data.version == 0)
}

/// The first counterexample for `model` / `variant` in a `check --format json` report: its
/// property, initial state, actions (from its explorer link's indices) and loop start.
pub fn from_file(
    world: &World,
    path: &Path,
    model: &str,
    variant: &str,
) -> Result<(PropertyName, usize, Vec<Action>, Option<usize>), String> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--replay {file}: {e}"))?;
    let report: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("--replay {file}: not a `check --format json` report: {e}"))?;
    let runs = report["runs"]
        .as_array()
        .ok_or_else(|| format!("--replay {file}: no `runs` (a `check --format json` report has them)"))?;
    let run = runs
        .iter()
        .find(|r| r["model"] == model && r["variant"] == variant)
        .ok_or_else(|| format!("--replay {file}: no run of {model} / {variant} in it"))?;
    let property = run["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["counterexample"].is_object())
        .ok_or_else(|| format!("--replay {file}: the run of {model} / {variant} has no counterexample"))?;
    let name = property["name"].as_str().and_then(PropertyName::parse).ok_or_else(|| {
        format!("--replay {file}: a counterexample of an unknown property {}", property["name"])
    })?;
    let cx = &property["counterexample"];
    let url = cx["explorer_url"].as_str().unwrap_or_default();
    let indices: Vec<usize> = url
        .split_once("#/steps/")
        .map(|(_, steps)| steps.split('/').map(|i| i.parse::<usize>()).collect::<Result<_, _>>())
        .transpose()
        .map_err(|e| format!("--replay {file}: the counterexample's explorer_url {url:?}: {e}"))?
        .ok_or_else(|| format!("--replay {file}: the counterexample has no explorer_url with its steps"))?;
    let (&init, steps) =
        indices.split_first().ok_or_else(|| format!("--replay {file}: an empty counterexample"))?;
    let mut state = world.init_states().into_iter().nth(init).ok_or_else(|| {
        format!("--replay {file}: it starts at initial state {init}, which the model does not have")
    })?;
    let mut actions = Vec::new();
    for (n, &i) in steps.iter().enumerate() {
        let mut enabled = Vec::new();
        world.actions(&state, &mut enabled);
        let action = enabled.get(i).cloned().ok_or_else(|| {
            format!(
                "--replay {file}: step {} takes action {i} of {}: the counterexample is not of this model (made from another version of it?)",
                n + 1,
                enabled.len()
            )
        })?;
        state = world
            .next_state(&state, action.clone())
            .ok_or_else(|| format!("--replay {file}: step {} has no next state", n + 1))?;
        actions.push(action);
    }
    let loop_from =
        cx["loop_from_step"].as_u64().map(|s| s as usize).filter(|&s| (1..=actions.len()).contains(&s));
    // The steps fit this model; do they still violate the property? (A report of another
    // version of the model, or of another policy, may walk here and violate nothing.)
    let violates = match loop_from {
        // A lasso's loop ends in the state it began in.
        Some(from) => {
            let mut at_loop = world.init_states().into_iter().nth(init).expect("checked above");
            for action in &actions[..from - 1] {
                at_loop = world.next_state(&at_loop, action.clone()).expect("checked above");
            }
            at_loop == state
        }
        None => !name.is_liveness() && !crate::model::properties::holds(name, &world.cfg, &state),
    };
    if !violates {
        return Err(format!(
            "--replay {file}: its counterexample for {name} does not violate it in this model (made from another version of the model, or another policy?): check the model again"
        ));
    }
    Ok((name, init, actions, loop_from))
}
