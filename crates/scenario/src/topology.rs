//! A picture of an emulated topology for the report: one box per `[[node]]` entry (a group of
//! hosts is one box, "client ×600"), in columns by hop distance from the server's entry,
//! links between entries as lines, emulated links in red with their settings as built and, if
//! the run changed them, as they ended; a link down at the end dashed in grey. A legend says
//! which is which.

use std::collections::{BTreeMap, VecDeque};

use plotters::prelude::*;

/// How the run left the network: the links down at its end (indices into the plan's links),
/// and each emulated link's settings then (the link emulator's counters, by node names).
#[derive(Default)]
pub struct AtEnd<'a> {
    pub down: &'a [usize],
    pub links: &'a [horde_emu::fwd::LinkReport],
}

/// An emulated link's label: its settings as built and, where the run changed them, as it
/// left them; each direction's where the two differ.
fn label(plan: &horde_topo::Plan, l: &horde_topo::PlannedLink, describe: &impl Fn(&horde_impair::LinkSpec) -> String, end: &AtEnd) -> String {
    let (na, nb) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
    let one = |from: &str, to: &str, spec: &horde_impair::LinkSpec| {
        let built = describe(spec);
        let ended = end.links.iter().find_map(|r| match (&r.a, &r.b) {
            (x, y) if x == from && y == to => Some(&r.ab.spec),
            (x, y) if x == to && y == from => Some(&r.ba.spec),
            _ => None,
        });
        match ended {
            Some(now) if *now != built => format!("as built: {built}, at the end: {now}"),
            _ => built,
        }
    };
    let (ab, ba) = (one(na, nb, &l.ab), one(nb, na, &l.ba));
    if ab == ba {
        ab
    } else {
        format!("{na} → {nb}: {ab}, {nb} → {na}: {ba}")
    }
}

/// The SVG picture of `plan`, with `server` (a node name) at the left, and the network as the
/// run left it.
pub fn svg(plan: &horde_topo::Plan, server: &str, describe: impl Fn(&horde_impair::LinkSpec) -> String, end: &AtEnd) -> String {
    // Entries: groups (and single nodes, which are groups of one) by name.
    let mut entry_of = vec![String::new(); plan.nodes.len()];
    for (name, members) in &plan.groups {
        for &m in members {
            entry_of[m] = name.clone();
        }
    }
    let entries: Vec<String> = plan.groups.keys().cloned().collect();
    let idx = |name: &str| entries.iter().position(|e| e == name);
    // Edges between entries, deduplicated, with whether any of them is emulated, a label (as
    // built, and as ended where the run changed it), how many links, and how many are down.
    let mut edges: BTreeMap<(usize, usize), (bool, String, usize, usize)> = BTreeMap::new();
    for (li, l) in plan.links.iter().enumerate() {
        let (Some(a), Some(b)) = (idx(&entry_of[l.a.node]), idx(&entry_of[l.b.node])) else { continue };
        let key = (a.min(b), a.max(b));
        let e = edges.entry(key).or_insert((false, String::new(), 0, 0));
        e.2 += 1;
        e.3 += usize::from(end.down.contains(&li));
        if l.impaired() && !e.0 {
            e.0 = true;
            e.1 = label(plan, l, &describe, end);
        }
    }
    // Columns: hop distance from the server's entry (unreached entries last).
    let start = plan.node(server).and_then(|i| idx(&entry_of[i])).unwrap_or(0);
    let mut dist = vec![usize::MAX; entries.len()];
    dist[start] = 0;
    let mut q = VecDeque::from([start]);
    while let Some(x) = q.pop_front() {
        for &(a, b) in edges.keys() {
            let y = if a == x {
                b
            } else if b == x {
                a
            } else {
                continue;
            };
            if dist[y] == usize::MAX {
                dist[y] = dist[x] + 1;
                q.push_back(y);
            }
        }
    }
    let maxd = dist.iter().filter(|d| **d != usize::MAX).max().copied().unwrap_or(0);
    for d in dist.iter_mut().filter(|d| **d == usize::MAX) {
        *d = maxd + 1;
    }
    let cols = dist.iter().max().copied().unwrap_or(0) + 1;
    let mut rows = vec![0usize; cols];
    let mut pos = vec![(0usize, 0usize); entries.len()];
    for (i, d) in dist.iter().enumerate() {
        pos[i] = (*d, rows[*d]);
        rows[*d] += 1;
    }
    let (cw, rh) = (340i32, 110i32);
    let w = (cols as i32 * cw + 40).max(800) as u32;
    // a link's label runs one setting a line below its middle: room for the longest above the
    // legend
    let label_lines = edges.values().map(|e| e.1.split(", ").count() + 1).max().unwrap_or(0) as i32;
    let h = (rows.iter().max().copied().unwrap_or(1) as i32 * rh + 90 + (14 * label_lines - rh / 2).max(0)) as u32;
    let centre = |i: usize| (20 + pos[i].0 as i32 * cw + 80, 50 + pos[i].1 as i32 * rh + 20);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let _ = root.draw(&Text::new(format!("Emulated topology `{}`", plan.name), (20, 10), ("sans-serif", 18).into_font()));
        let (red, grey, down) = (RGBColor(0xd6, 0x27, 0x28), RGBColor(0x55, 0x55, 0x55), RGBColor(0xaa, 0xaa, 0xaa));
        for (&(a, b), (emulated, label, n, n_down)) in &edges {
            let (pa, pb) = (centre(a), centre(b));
            let colour = if *n_down == *n {
                down
            } else if *emulated {
                red
            } else {
                grey
            };
            if *n_down == *n {
                // dashed: a link down at the end
                for k in 0..20 {
                    let at = |f: f64| (pa.0 + ((pb.0 - pa.0) as f64 * f) as i32, pa.1 + ((pb.1 - pa.1) as f64 * f) as i32);
                    let _ = root.draw(&PathElement::new(vec![at(k as f64 / 20.0), at((k as f64 + 0.5) / 20.0)], colour.stroke_width(2)));
                }
            } else {
                let _ = root.draw(&PathElement::new(vec![pa, pb], colour.stroke_width(2)));
            }
            let mut text = match (*emulated, *n > 1) {
                (true, _) => label.clone(),
                (false, true) => format!("{n} links"),
                (false, false) => String::new(),
            };
            if *n_down > 0 {
                text = if *n > 1 { format!("{n_down} of {n} links down at the end, {text}") } else { format!("down at the end, {text}") };
            }
            // Below the line's middle, one setting per line.
            let style = ("sans-serif", 12)
                .into_font()
                .color(&colour)
                .pos(plotters::style::text_anchor::Pos::new(plotters::style::text_anchor::HPos::Center, plotters::style::text_anchor::VPos::Top));
            for (k, part) in text.split(", ").filter(|s| !s.is_empty()).enumerate() {
                let _ = root.draw(&Text::new(part.to_string(), ((pa.0 + pb.0) / 2, (pa.1 + pb.1) / 2 + 6 + 14 * k as i32), style.clone()));
            }
        }
        for (i, name) in entries.iter().enumerate() {
            let members = &plan.groups[name];
            let kind = plan.nodes[members[0]].kind;
            let (x, y) = centre(i);
            let fill = match kind {
                horde_topo::Kind::Host => RGBColor(0xe8, 0xf1, 0xfa),
                horde_topo::Kind::Router => RGBColor(0xfd, 0xf0, 0xe0),
                _ => RGBColor(0xee, 0xee, 0xee),
            };
            let _ = root.draw(&Rectangle::new([(x - 75, y - 22), (x + 75, y + 22)], fill.filled()));
            let _ = root.draw(&Rectangle::new([(x - 75, y - 22), (x + 75, y + 22)], BLACK.stroke_width(1)));
            let label = if members.len() > 1 { format!("{name} ×{}", members.len()) } else { name.clone() };
            let _ = root.draw(&Text::new(label, (x - 68, y - 17), ("sans-serif", 15).into_font()));
            let _ =
                root.draw(&Text::new(format!("{kind:?}").to_lowercase(), (x - 68, y + 2), ("sans-serif", 12).into_font().color(&RGBColor(0x66, 0x66, 0x66))));
        }
        // the legend, along the bottom
        let y = h as i32 - 22;
        for (k, (colour, what, dashed)) in [
            (red, "emulated link (settings as built; as they ended if the run changed them)", false),
            (grey, "plain link", false),
            (down, "down at the end", true),
        ]
        .into_iter()
        .enumerate()
        {
            let x = [20, 500, 620][k];
            let seg = if dashed { vec![(x, y), (x + 8, y)] } else { vec![(x, y), (x + 24, y)] };
            let _ = root.draw(&PathElement::new(seg, colour.stroke_width(2)));
            if dashed {
                let _ = root.draw(&PathElement::new(vec![(x + 14, y), (x + 24, y)], colour.stroke_width(2)));
            }
            let _ = root.draw(&Text::new(what.to_string(), (x + 30, y - 7), ("sans-serif", 12).into_font()));
        }
        let _ = root.present();
    }
    // Links are the picture's data: marked like chart series, so the page's check counts them.
    buf.replace("stroke-width=\"2\" points=", "class=\"series\" stroke-width=\"2\" points=")
}

#[cfg(test)]
mod tests {
    /// A link down at the end is drawn apart (dashed, grey, said in its label) and the legend
    /// names it; an emulated link the run changed shows both settings.
    #[test]
    fn a_downed_link_and_a_changed_one_are_drawn_as_the_run_left_them() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies/isp.toml")).unwrap();
        let plan = horde_topo::plan(&text, "isp.toml", "x").unwrap();
        let r12 = plan.links.iter().position(|l| plan.nodes[l.a.node].name == "r1" && plan.nodes[l.b.node].name == "r2").unwrap();
        let built = super::svg(&plan, "server", horde_emu::fwd::describe, &super::AtEnd::default());
        let downs = |svg: &str| svg.matches("down at the end").count();
        let greys = |svg: &str| svg.to_lowercase().matches("#aaaaaa").count();
        assert!(downs(&built) == 1 && !built.contains("at the end: ") && built.contains("plain link"), "as built: the legend only");
        let mut ended = horde_emu::fwd::LinkReport { a: "r1".into(), b: "r2".into(), ab: Default::default(), ba: Default::default() };
        ended.ab.spec = "rate 20.000 Mbit/s, delay 150.000 ms".into();
        let down = [r12];
        let svg = super::svg(&plan, "server", horde_emu::fwd::describe, &super::AtEnd { down: &down, links: std::slice::from_ref(&ended) });
        assert!(downs(&svg) == 2 && svg.contains("at the end: rate 20.000 Mbit/s") && svg.contains("delay 150.000 ms"), "{svg}");
        assert!(greys(&svg) > greys(&built) + 10, "drawn dashed in the downed colour");
    }

    /// An asymmetric link (10 Mbit/s one way, 20 the other) shows each direction's settings,
    /// and its label ends above the legend.
    #[test]
    fn an_asymmetric_link_shows_both_directions_above_the_legend() {
        let text = "name = \"asym\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\n[link.ab]\nrate = \"10mbit\"\ndelay = \"30ms\"\n[link.ba]\nrate = \"20mbit\"\ndelay = \"30ms\"\n";
        let plan = horde_topo::plan(text, "asym.toml", "x").unwrap();
        let svg = super::svg(&plan, "b", horde_emu::fwd::describe, &super::AtEnd::default());
        assert!(svg.contains("a → b: rate 10.000 Mbit/s") && svg.contains("b → a: rate 20.000 Mbit/s"), "{svg}");
        // every text's y below the legend's (the last line of the picture) would overlap it
        let ys: Vec<f64> = svg.split("<text").skip(1).filter_map(|t| t.split("y=\"").nth(1)?.split('"').next()?.parse().ok()).collect();
        let legend =
            svg.split("<text").skip(1).find(|t| t.contains("plain link")).and_then(|t| t.split("y=\"").nth(1)?.split('"').next()?.parse::<f64>().ok()).unwrap();
        let labels: Vec<f64> = svg
            .split("<text")
            .skip(1)
            .filter(|t| t.contains("Mbit/s") || t.contains(" ms<"))
            .filter_map(|t| t.split("y=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect();
        assert!(!labels.is_empty() && labels.iter().all(|y| *y + 14.0 < legend), "labels at {labels:?}, legend at {legend} ({ys:?})");
    }
}
