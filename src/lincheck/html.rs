//! `history check FILE --html OUT.html`: a self-contained page (inline CSS and SVG, one line of
//! script, nothing fetched) drawing a checked history. Per key, one row per client, each
//! operation a bar from its call to its return (to the right edge, dashed, if it never
//! returned). Times are drawn by rank, not to scale, so short operations stay readable. On
//! the key that is not linearizable, the operations of the longest linearizable prefix are
//! green and numbered in their linearization order, the operation that cannot be linearized
//! is red, and a red line marks its return: no order of what came before explains its output
//! by then. The page opens on that key, with that operation's client on the first row and the
//! operations scrolled sideways to it.

use super::report::Checked;
use super::Verdict;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;

const ROW: usize = 24;
const RANK: usize = 12;
const LEFT: usize = 90;
/// Where the first operation may start in the scrolled part.
const PAD: usize = 6;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page for the history `name`, checked as `c`.
pub fn page(name: &str, c: &Checked) -> String {
    // Where the verdict points: prefix order per operation, and the unplaced operation.
    let mut order: HashMap<usize, usize> = HashMap::new();
    let mut unplaced = None;
    if let Verdict::NotLinearizable { longest_prefix, unplaced_op } = &c.verdict {
        for (n, &i) in longest_prefix.iter().enumerate() {
            order.insert(i, n + 1);
        }
        unplaced = Some(*unplaced_op);
    }
    let failing_key = unplaced.map(|u| c.shown[u].key.clone());
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, op) in c.shown.iter().enumerate() {
        by_key.entry(op.key.as_str()).or_default().push(i);
    }
    // The failing key first.
    let mut keys: Vec<&str> = by_key.keys().copied().collect();
    keys.sort_by_key(|k| Some(*k) != failing_key.as_deref());

    let verdict = match &c.verdict {
        Verdict::Linearizable => "linearizable".to_owned(),
        Verdict::NotLinearizable { longest_prefix, .. } => {
            format!("NOT linearizable (longest linearizable prefix: {} operations)", longest_prefix.len())
        }
        Verdict::Unknown { reason } => format!("unknown: {reason}"),
    };
    let mut html = String::new();
    let units = if c.nanoseconds { "ns" } else { "log lines" };
    let _ = write!(
        html,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 16px; color: #222; }}
h1 {{ font-size: 18px; margin: 0 0 4px; }} h2 {{ font-size: 15px; margin: 18px 0 4px; }}
.verdict {{ font-weight: 600; }} .bad {{ color: #b00; }} .good {{ color: #070; }}
.note {{ color: #555; margin: 2px 0; }}
.legend span {{ display: inline-block; padding: 1px 8px; margin-right: 8px; border-radius: 3px; }}
.lane {{ display: flex; border: 1px solid #ddd; }} .names {{ flex: none; border-right: 1px solid #ddd; }}
.scroll {{ overflow-x: auto; flex: 1; }}
svg text {{ font: 11px ui-monospace, monospace; }}
rect.op {{ fill: #d9d9d9; stroke: #888; }}
rect.prefix {{ fill: #9fd89f; stroke: #3a7d3a; }}
rect.open {{ fill-opacity: 0.45; stroke-dasharray: 4 3; }}
rect.unplaced {{ fill: #f26b6b; stroke: #900; stroke-width: 3; }}
g.o:hover rect {{ stroke: #000; stroke-width: 2; }}
line.deadline {{ stroke: #c00; stroke-width: 2; stroke-dasharray: 6 3; }}
</style></head><body>
<h1>{title}</h1>
<p class="verdict {class}">{verdict}</p>
"#,
        title = escape(name),
        class = if c.verdict.is_linearizable() { "good" } else { "bad" },
        verdict = escape(&verdict),
    );
    if let (Some(u), Some(description)) = (unplaced, &c.unplaced) {
        let key = failing_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .map(|k| format!("key {k:?}: "))
            .unwrap_or_default();
        let _ = writeln!(
            html,
            r#"<p class="note bad">{}{} cannot be linearized: no order of the operations before the red line explains its output. Operation {u} is drawn in red.</p>"#,
            escape(&key),
            escape(description)
        );
    }
    let _ = writeln!(
        html,
        r#"<p class="note">{} operations, {} key(s); one row per client; time by rank ({units}), not to scale; hover an operation for its details.</p>
<p class="legend"><span style="background:#9fd89f">n: linearized n-th in the longest prefix</span><span style="background:#f26b6b">cannot be linearized</span><span style="background:#d9d9d9">other</span><span style="border:1px dashed #888">no return: outcome unknown</span></p>"#,
        c.ops, c.keys
    );
    for key in keys {
        key_section(&mut html, c, key, &by_key[key], &order, unplaced, failing_key.as_deref());
    }
    let _ = writeln!(
        html,
        r#"<script>var u = document.getElementById("unplaced"); if (u) {{ var s = u.closest(".scroll"); s.scrollLeft += u.getBoundingClientRect().left - s.getBoundingClientRect().left - s.clientWidth / 2; }}</script>
</body></html>"#
    );
    html
}

/// One key's section: its verdict and the operations drawn one row per client, time by rank.
fn key_section(
    html: &mut String,
    c: &Checked,
    key: &str,
    ops: &[usize],
    order: &HashMap<usize, usize>,
    unplaced: Option<usize>,
    failing_key: Option<&str>,
) {
    let unit = if c.nanoseconds { "ns" } else { "log line" };
    let key_verdict = c
        .per_key
        .iter()
        .find(|(k, _)| k.as_deref().unwrap_or("") == key)
        .map(|(_, v)| match v {
            Verdict::Linearizable => "linearizable".to_owned(),
            Verdict::NotLinearizable { .. } => "NOT linearizable".to_owned(),
            Verdict::Unknown { reason } => format!("unknown ({reason})"),
        })
        .unwrap_or_default();
    if !key.is_empty() || c.keys > 1 {
        let _ = writeln!(html, "<h2>key {}: {}</h2>", escape(&format!("{key:?}")), escape(&key_verdict));
    }
    // Times by rank.
    let times: BTreeSet<u64> =
        ops.iter().flat_map(|&i| [Some(c.shown[i].call), c.shown[i].ret]).flatten().collect();
    let rank: HashMap<u64, usize> = times.iter().enumerate().map(|(r, &t)| (t, r)).collect();
    // The client of the operation that cannot be linearized on the first row.
    let first = unplaced.map(|u| c.shown[u].client);
    let mut clients: Vec<u64> =
        ops.iter().map(|&i| c.shown[i].client).collect::<BTreeSet<_>>().into_iter().collect();
    clients.sort_by_key(|&cl| (Some(cl) != first || Some(key) != failing_key, cl));
    let row: HashMap<u64, usize> = clients.iter().enumerate().map(|(r, &cl)| (cl, r)).collect();
    let width = PAD + (times.len() + 2) * RANK;
    let height = clients.len() * ROW + 24;
    let x = |t: u64| PAD + rank[&t] * RANK + RANK / 2;
    // The client names stay in view while the operations scroll.
    let _ = writeln!(
        html,
        r#"<div class="lane"><svg class="names" xmlns="http://www.w3.org/2000/svg" width="{LEFT}" height="{height}">"#
    );
    for (&client, &r) in &row {
        let y = r * ROW;
        if r % 2 == 0 {
            let _ = writeln!(html, r##"<rect x="0" y="{y}" width="{LEFT}" height="{ROW}" fill="#f6f6f6"/>"##);
        }
        let _ = writeln!(html, r#"<text x="4" y="{}">client {client}</text>"#, y + 16);
    }
    let _ = writeln!(
        html,
        r#"</svg><div class="scroll"><svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">"#
    );
    for &r in row.values() {
        if r % 2 == 0 {
            let _ = writeln!(
                html,
                r##"<rect x="0" y="{}" width="{width}" height="{ROW}" fill="#f6f6f6"/>"##,
                r * ROW
            );
        }
    }
    let mut deadline = None;
    for &i in ops {
        let op = &c.shown[i];
        let y = row[&op.client] * ROW + 3;
        let x0 = x(op.call);
        let x1 = op.ret.map(x).unwrap_or(width - RANK / 2);
        let w = (x1 - x0).max(4);
        let mut class = String::from("op");
        let mut tag = String::new();
        if let Some(n) = order.get(&i) {
            class.push_str(" prefix");
            tag = format!("{n}: ");
        }
        if op.ret.is_none() {
            class.push_str(" open");
        }
        let id = if unplaced == Some(i) {
            class.push_str(" unplaced");
            deadline = Some((x1, format!("op {i} ({})", op.label)));
            r#" id="unplaced""#
        } else {
            ""
        };
        let times = match op.ret {
            Some(r) => format!("{}..{r}", op.call),
            None => format!("{}.. (never returned)", op.call),
        };
        let title = format!("op {i}, client {}, {unit} {times}\n{tag}{}", op.client, op.label);
        let text: String = format!("{tag}{}", op.label).chars().take((w / 7).saturating_sub(1)).collect();
        let _ = writeln!(
            html,
            r#"<g class="o"{id}><title>{}</title><rect class="{class}" x="{x0}" y="{y}" width="{w}" height="{}" rx="3"/><text x="{}" y="{}">{}</text></g>"#,
            escape(&title),
            ROW - 6,
            x0 + 3,
            y + 13,
            escape(&text)
        );
    }
    if let Some((dx, what)) = deadline {
        let text = format!("{what} cannot be linearized by here");
        let _ = writeln!(
            html,
            r##"<line class="deadline" x1="{dx}" y1="0" x2="{dx}" y2="{}"/><text x="{}" y="{}" fill="#c00">{}</text>"##,
            height - 14,
            dx.saturating_sub(text.chars().count() * 7 / 2).max(PAD),
            height - 3,
            escape(&text)
        );
    }
    let _ = writeln!(html, "</svg></div></div>");
}
