//! What a model claims about itself, validated: its variants (policy patches over the
//! model's), the verdict each expects per property, and a staged rollout's stages.

use super::*;

/// The variants: `default` from `[expect]` if it is there, then each `[variants.NAME]` with its
/// policy on top of the scenario's own.
pub(super) fn variants(
    file: &str,
    base_policy: &SourcedPolicy,
    expect: &IndexMap<String, Verdict>,
    raw: &IndexMap<String, RawVariant>,
    properties: &[PropertyName],
) -> Result<Vec<Variant>, String> {
    let mut variants = Vec::new();
    if !expect.is_empty() {
        variants.push(Variant {
            name: "default".into(),
            description: "the scenario's own [policy]".into(),
            policy: base_policy.clone(),
            expect: expectations("expect", expect, properties)?,
        });
    }
    for (name, v) in raw {
        check_file_name(&format!("variants.{name:?}"), name)?;
        if name == "default" {
            return Err(
                "key `variants.default`: the name `default` is the scenario's own [policy] and [expect]"
                    .into(),
            );
        }
        // The properties and the machines are the family's: a variant changes knobs only.
        let family = base_policy.patch.replication.unwrap_or(Replication::Quorum);
        if let Some(r) = v.policy.replication.filter(|&r| r != family) {
            return Err(format!(
                "key `variants.{name}.policy.replication` = \"{}\": a variant may not change the protocol family (the model's [policy] runs `replication = \"{}\"`)",
                r.as_str(),
                family.as_str()
            ));
        }
        let over = SourcedPolicy::new(v.policy.clone(), &format!("{file} [variants.{name}.policy]"));
        variants.push(Variant {
            name: name.clone(),
            description: v.description.clone().unwrap_or_default(),
            policy: base_policy.then(&over),
            expect: expectations(&format!("variants.{name}.expect"), &v.expect, properties)?,
        });
    }
    // A rollout's stages are other variants' policies: resolved once they all are.
    for (name, v) in raw {
        let plan = rollout(name, v, &variants, raw)?;
        if let Some(plan) = plan {
            let i = variants.iter().position(|x| &x.name == name).expect("listed above");
            let mut policy = plan.stages[0].1.clone();
            policy.rollout = Some(Box::new(plan));
            variants[i].policy = policy;
        }
    }
    if variants.is_empty() {
        return Err(
            "the model declares no expectations: add `[expect]` or a `[variants.NAME.expect]` table".into()
        );
    }
    Ok(variants)
}

/// One `[expect]` table: a verdict for each of the model's properties, and for no other.
fn expectations(
    table: &str,
    raw: &IndexMap<String, Verdict>,
    properties: &[PropertyName],
) -> Result<IndexMap<PropertyName, Verdict>, String> {
    let mut out = IndexMap::new();
    for (k, v) in raw {
        let p = PropertyName::parse(k).ok_or_else(|| {
            format!(
                "key `{table}.{k}` = \"{v}\": no such property `{k}`{}; properties are {}",
                property_hint(k),
                property_names().join(", ")
            )
        })?;
        if !properties.contains(&p) {
            return Err(format!("key `{table}.{k}`: property `{k}` is not in this model's `properties`"));
        }
        out.insert(p, *v);
    }
    for p in properties {
        if !out.contains_key(p) {
            return Err(format!("key `{table}.{p}` is missing: table `[{table}]` declares no verdict for property `{p}` (add `{p} = \"holds\"` or `\"violated\"`)"));
        }
    }
    Ok(out)
}

pub(super) fn property(key: &str, name: &str) -> Result<PropertyName, String> {
    PropertyName::parse(name).ok_or_else(|| {
        format!(
            "key `{key}` = \"{name}\": no such property{}; properties are {}",
            property_hint(name),
            property_names().join(", ")
        )
    })
}

fn property_names() -> Vec<&'static str> {
    PropertyName::ALL.iter().map(|p| p.as_str()).collect()
}

/// " (did you mean `x`?)" for the property nearest to `name`, if one is near.
fn property_hint(name: &str) -> String {
    crate::config::nearest(name, property_names())
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default()
}

/// A variant's rollout plan, if it has one: its stages are other variants (or `default`).
fn rollout(
    name: &str,
    v: &RawVariant,
    variants: &[Variant],
    raw: &IndexMap<String, RawVariant>,
) -> Result<Option<crate::config::policy::RolloutPlan>, String> {
    use crate::config::policy::{RolloutOrder, RolloutPlan};
    let Some(stage_names) = &v.rollout else {
        if v.rollback || v.rollout_order.is_some() {
            return Err(format!(
                "key `variants.{name}.{}` is set without `variants.{name}.rollout`",
                if v.rollback { "rollback" } else { "rollout_order" }
            ));
        }
        return Ok(None);
    };
    if !v.policy.keys().is_empty() {
        return Err(format!(
            "keys `variants.{name}.policy` and `variants.{name}.rollout` are both set: a rollout's policies are its stages; put the policy in a variant of its own and list it"
        ));
    }
    if stage_names.len() < 2 {
        return Err(format!(
            "key `variants.{name}.rollout` lists {} stage(s): a rollout goes from one variant's policy to another's, list at least two",
            stage_names.len()
        ));
    }
    if stage_names.len() > ROLLOUT_STAGES_MAX {
        return Err(format!(
            "key `variants.{name}.rollout` lists {} stages: at most {ROLLOUT_STAGES_MAX}",
            stage_names.len()
        ));
    }
    let mut stages = Vec::new();
    for (i, stage) in stage_names.iter().enumerate() {
        let known: Vec<&str> = variants.iter().map(|x| x.name.as_str()).collect();
        let found = variants.iter().find(|x| &x.name == stage).ok_or_else(|| {
            format!(
                "key `variants.{name}.rollout[{i}]` = \"{stage}\": no such variant (variants: {})",
                known.join(", ")
            )
        })?;
        // Declared before or after this one: plans are filled in one variant at a time.
        let is_rollout =
            found.policy.rollout.is_some() || raw.get(stage).is_some_and(|r| r.rollout.is_some());
        if stage == name || is_rollout {
            return Err(format!(
                "key `variants.{name}.rollout[{i}]` = \"{stage}\": a stage must be a plain policy, not a rollout"
            ));
        }
        if i > 0 && stage_names[i - 1] == *stage {
            return Err(format!(
                "key `variants.{name}.rollout[{i}]` = \"{stage}\": the same stage as the one before; each stage changes the policy"
            ));
        }
        stages.push((stage.clone(), found.policy.clone()));
    }
    let order = match v.rollout_order.as_deref() {
        None | Some("any") => RolloutOrder::Any,
        Some("stage_by_stage") => RolloutOrder::StageByStage,
        Some(other) => {
            return Err(format!(
                "key `variants.{name}.rollout_order` = \"{other}\": must be \"any\" or \"stage_by_stage\""
            ))
        }
    };
    Ok(Some(RolloutPlan { stages, rollback: v.rollback, order }))
}
