//! Topology resolution: groups, segments, addresses, routes, names and impairments.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use horde_impair::Loss;
use horde_topo::{plan, Kind, Subnet};

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../../examples/topologies/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn seed_testbed_is_one_switched_segment() {
    let p = plan(&example("seed-testbed.toml"), "seed-testbed.toml", "a1b2").unwrap();
    assert_eq!(p.nodes.iter().filter(|n| n.kind == Kind::Host).count(), 241);
    assert_eq!(p.segments.len(), 1);
    assert_eq!(p.segments[0].subnet, Subnet::parse("10.10.0.0/23").unwrap());
    let addrs: HashSet<Ipv4Addr> = p.segments[0].members.iter().map(|m| m.1).collect();
    assert_eq!(addrs.len(), 241, "every host has its own address");
    assert!(p.routes.is_empty(), "no routers, no routes");
    assert!(p.node("g8h30").is_some() && p.node("g9h1").is_none());
}

#[test]
fn access_network_routes_along_the_routers() {
    let p = plan(&example("access.toml"), "access.toml", "x").unwrap();
    assert_eq!(p.segments.len(), 3);
    let r1 = p.node("r1").unwrap();
    let r2 = p.node("r2").unwrap();
    let server = p.node("server").unwrap();
    let c7 = p.node("client7").unwrap();
    let addr_in = |n: usize, net: &str| {
        let s = Subnet::parse(net).unwrap();
        p.addrs(n).into_iter().find(|a| s.overlaps(&Subnet { base: *a, prefix: 30 })).unwrap()
    };
    // r1 reaches the server's subnet through r2's address on the bottleneck, and back.
    let route = |n: usize, net: &str| p.routes.iter().find(|r| r.node == n && r.dst == Some(Subnet::parse(net).unwrap())).map(|r| r.via);
    assert_eq!(route(r1, "10.2.0.0/24"), Some(addr_in(r2, "10.255.0.0/30")));
    assert_eq!(route(r2, "10.1.0.0/24"), Some(addr_in(r1, "10.255.0.0/30")));
    // hosts default to the router on their segment (routers get the first addresses)
    let default = |n: usize| p.routes.iter().find(|r| r.node == n && r.dst.is_none()).map(|r| r.via);
    assert_eq!(default(c7), Some(Ipv4Addr::new(10, 1, 0, 1)));
    assert_eq!(default(server), Some(addr_in(r2, "10.2.0.0/24")));
    assert_eq!(addr_in(r1, "10.1.0.0/24"), Ipv4Addr::new(10, 1, 0, 1));
    // the bottleneck's impairments, per direction
    let l = p.links.iter().find(|l| l.a.node == r1 && l.b.node == r2).unwrap();
    assert_eq!((l.ab.rate_bps, l.ba.rate_bps), (Some(10_000_000), Some(20_000_000)));
    assert_eq!((l.ab.delay_ns, l.ab.jitter_ns, l.ab.loss), (20_000_000, 5_000_000, Loss::Random(0.01)));
    assert_eq!(l.ba.queue_limit_bytes, Some(64_000));
}

#[test]
fn names_carry_the_experiment_and_fit_the_kernel() {
    let a = plan(&example("access.toml"), "access.toml", "abc123").unwrap();
    let b = plan(&example("access.toml"), "access.toml", "zz9").unwrap();
    let names = |p: &horde_topo::Plan| -> HashSet<String> {
        p.nodes
            .iter()
            .map(|n| n.ns.clone())
            .chain(p.links.iter().flat_map(|l| [l.a.ifname.clone(), l.b.ifname.clone()]).filter(|n| n.starts_with("hd")))
            .collect()
    };
    assert!(names(&a).is_disjoint(&names(&b)), "two experiments never share a name");
    for l in &a.links {
        for p in [&l.a, &l.b] {
            assert!(p.ifname.len() <= 15, "IFNAMSIZ: {}", p.ifname);
        }
    }
    assert!(a.nodes.iter().all(|n| n.ns.contains("abc123")));
}

#[test]
fn a_thousand_hosts_get_an_auto_subnet() {
    let text = "name = 't'\n[[node]]\nname = 'h'\nkind = 'host'\ncount = 1000\n[[node]]\nname = 's'\nkind = 'switch'\n[[link]]\na = 'h'\nb = 's'\n";
    let p = plan(text, "t.toml", "k").unwrap();
    assert_eq!(p.segments[0].subnet.prefix, 22);
    assert_eq!(p.segments[0].members.len(), 1000);
}

#[test]
fn gilbert_elliott_loss_from_a_table() {
    let text =
        "name = 't'\n[[node]]\nname = 'a'\nkind = 'host'\n[[node]]\nname = 'b'\nkind = 'host'\n[[link]]\na = 'a'\nb = 'b'\nloss = { p = '1%', r = '25%' }\n";
    let p = plan(text, "t.toml", "k").unwrap();
    assert_eq!(p.links[0].ab.loss, Loss::GilbertElliott { p: 0.01, r: 0.25, loss_bad: 1.0, loss_good: 0.0 });
}

#[test]
fn bad_topologies_name_the_field() {
    let base = "name = 't'\n[[node]]\nname = 'a'\nkind = 'host'\n[[node]]\nname = 'b'\nkind = 'host'\n";
    let case = |extra: &str, needle: &str| {
        let e = plan(&format!("{base}{extra}"), "t.toml", "k").unwrap_err();
        assert!(e.to_string().contains(needle), "expected `{needle}` in: {e}");
    };
    case("[[link]]\na = 'a'\nb = 'c'\n", "b: unknown node `c`");
    case("[[link]]\na = 'a'\nb = 'b'\nloss = '1'\n", "must be a percentage");
    case("[[link]]\na = 'a'\nb = 'b'\nrate = '10'\n", "needs a unit");
    case("[[link]]\na = 'a'\nb = 'b'\ndelya = '5ms'\n", "unknown field `delya`");
    case("[[link]]\na = 'a'\nb = 'a'\n", "linked to itself");
    case("[[node]]\nname = 'a'\nkind = 'host'\n", "is used twice");
    case("[[node]]\nname = 'x'\nkind = 'host'\ncount = 3\n[[node]]\nname = 'y'\nkind = 'host'\ncount = 2\n[[link]]\na = 'x'\nb = 'y'\n", "cannot be paired");
    case(
        "[[node]]\nname = 's'\nkind = 'switch'\n[[node]]\nname = 'h'\nkind = 'host'\ncount = 5\n[[link]]\na = 'h'\nb = 's'\nsubnet = '10.0.0.0/30'\n",
        "holds 2 hosts but its segment has 5",
    );
    case("[[link]]\na = 'a'\nb = 'b'\nsubnet = '10.0.0.1/24'\n", "host bits set");
    // bit errors, reordering, routing
    case("[[link]]\na = 'a'\nb = 'b'\nber = 'lots'\n", "ber: `lots` is not a probability");
    case("[[link]]\na = 'a'\nb = 'b'\ndelay = '5ms'\nreorder_gap = 5\n", "reorder_gap: goes with reorder_prob");
    case("[[link]]\na = 'a'\nb = 'b'\nreorder_prob = '10%'\n", "reorder_prob: reordering sends some packets without their delay");
    case("[[link]]\na = 'a'\nb = 'b'\ncost = 0\n", "cost: must be 1..=65535");
    case("[[node]]\nname = 'r'\nkind = 'host'\nrouting = 'ospf'\n", "routing fields are for routers");
    case("[[node]]\nname = 'r'\nkind = 'router'\nrouting = 'eigrp'\n", "unknown variant `eigrp`");
    // external nodes
    case("[[node]]\nname = 'x'\nkind = 'external'\n", "needs `interface");
    case("[[node]]\nname = 'x'\nkind = 'host'\ninterface = 'eth1'\n", "only an external node");
    case("[[node]]\nname = 'x'\nkind = 'external'\ninterface = 'eth1/2'\n", "is not an interface name");
    case(
        "[[node]]\nname = 'x'\nkind = 'external'\ninterface = 'eth1'\n[[node]]\nname = 'y'\nkind = 'external'\ninterface = 'eth1'\n",
        "node `x` takes this interface already",
    );
    let ext =
        plan(&format!("{base}[[node]]\nname = 'x'\nkind = 'external'\ninterface = 'eth1'\nforce = true\n[[link]]\na = 'a'\nb = 'x'\n"), "t.toml", "k").unwrap();
    let x = ext.node("x").unwrap();
    assert_eq!(ext.nodes[x].external.as_ref().map(|e| (e.interface.as_str(), e.force)), Some(("eth1", true)));
    assert!(ext.nodes[x].kind.is_l2(), "an external node is a bridge with one real port");
    let ok = plan(&format!("{base}[[link]]\na = 'a'\nb = 'b'\ndelay = '5ms'\nber = '1e-6'\nreorder_prob = '25%'\nreorder_gap = 5\n"), "t.toml", "k").unwrap();
    assert_eq!((ok.links[0].ab.ber, ok.links[0].ab.reorder_prob, ok.links[0].ba.reorder_gap), (1e-6, 0.25, 5));
    let e = plan(base, "t.toml", "UPPER").unwrap_err();
    assert_eq!(e.field, "experiment id");
}

#[test]
fn a_link_may_name_one_member_of_a_group() {
    let t = "name = \"m\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 3\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"s\"\n[[link]]\na = \"h2\"\nb = \"h3\"\ndelay = \"1ms\"\n";
    let p = plan(t, "m.toml", "m").unwrap();
    assert_eq!(p.links.len(), 4);
    let l = &p.links[3];
    assert_eq!((p.nodes[l.a.node].name.as_str(), p.nodes[l.b.node].name.as_str()), ("h2", "h3"));
    let e = plan(&t.replace("a = \"h2\"", "a = \"h9\""), "m.toml", "m").unwrap_err();
    assert!(e.to_string().contains("unknown node `h9`"), "{e}");
}

const TWO_SWITCHES: &str = "name = \"t\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 2\n[[node]]\nname = \"s1\"\nkind = \"switch\"\n[[node]]\nname = \"s2\"\nkind = \"switch\"\n[[node]]\nname = \"s3\"\nkind = \"hub\"\n[[link]]\na = \"h1\"\nb = \"s1\"\n[[link]]\na = \"h2\"\nb = \"s2\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n";

#[test]
fn regression_switch_loops_are_refused() {
    assert!(plan(TWO_SWITCHES, "t.toml", "x").is_ok(), "a tree of switches is fine");
    // a second link between the same two switches, and a triangle through a hub
    for extra in ["[[link]]\na = \"s2\"\nb = \"s1\"\n", "[[link]]\na = \"s2\"\nb = \"s3\"\n[[link]]\na = \"s3\"\nb = \"s1\"\n"] {
        let e = plan(&format!("{TWO_SWITCHES}{extra}"), "t.toml", "x").unwrap_err();
        assert!(e.msg.contains("closes a loop") && e.msg.contains("without STP"), "{e}");
        assert!(e.field.starts_with("link "), "{e}");
    }
}

#[test]
fn regression_the_same_subnet_on_two_segments_is_refused() {
    let text = "name = \"t\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[node]]\nname = \"c\"\nkind = \"host\"\n\
                [[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.5.0.0/24\"\n[[link]]\na = \"b\"\nb = \"c\"\nsubnet = \"10.5.0.0/24\"\n";
    let e = plan(text, "t.toml", "x").unwrap_err();
    assert!(e.msg.contains("10.5.0.0/24 is given to two separate segments"), "{e}");
    let text = text.replace("subnet = \"10.5.0.0/24\"\n[[link]]", "subnet = \"10.5.0.0/16\"\n[[link]]");
    let e = plan(&text, "t.toml", "x").unwrap_err();
    assert!(e.msg.contains("overlaps"), "{e}");
}

#[test]
fn regression_experiment_ids_cannot_be_paths() {
    for bad in ["", "../../tmp/v", "/tmp/v", "abcdefg", "a b", "A1", "a/b", ".", "..", "é"] {
        assert!(horde_topo::check_exp_id(bad).is_err(), "{bad:?}");
        assert!(plan(TWO_SWITCHES, "t.toml", bad).is_err(), "{bad:?}");
    }
    assert!(horde_topo::check_exp_id("k3x9qa").is_ok());
}

#[test]
fn groups_are_exposed_by_name_and_a_lookalike_host_is_not_a_member() {
    // `client10` is a host of its own, not the 10th member of group `client` (of 3).
    let t = "name = \"g\"\n[[node]]\nname = \"client\"\nkind = \"host\"\ncount = 3\n[[node]]\nname = \"client10\"\nkind = \"host\"\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"client\"\nb = \"s\"\n[[link]]\na = \"client10\"\nb = \"s\"\n";
    let p = plan(t, "g.toml", "g").unwrap();
    let names = |g: &str| p.hosts_of(g).unwrap().iter().map(|&i| p.nodes[i].name.clone()).collect::<Vec<_>>();
    assert_eq!(names("client"), ["client1", "client2", "client3"]);
    assert_eq!(names("client10"), ["client10"]);
    assert!(p.hosts_of("client1").is_none(), "a member is not a group");
    assert!(p.hosts_of("nobody").is_none());
}

#[test]
fn a_live_change_is_typed_and_keeps_nanoseconds() {
    use horde_topo::{LinkChange, RawImpair};
    let base = horde_impair::LinkSpec { rate_bps: Some(10_000_000), delay_ns: 20_000_000, loss: Loss::Random(0.01), ..Default::default() };
    let c = LinkChange::parse(&RawImpair { delay: Some("1500ns".into()), ..Default::default() }).unwrap();
    let s = c.apply(&base, false).unwrap();
    assert_eq!(s.delay_ns, 1500, "no rounding to whole microseconds");
    assert_eq!((s.rate_bps, s.loss), (Some(10_000_000), Loss::Random(0.01)), "fields not given stay");
    let s = c.apply(&base, true).unwrap();
    assert_eq!((s.rate_bps, s.loss, s.delay_ns), (None, Loss::None, 1500), "--clear starts from nothing");
    let e = LinkChange::parse(&RawImpair { loss: Some(horde_topo::RawLoss::Percent("150%".into())), ..Default::default() }).unwrap_err();
    assert_eq!(e.0, "loss", "{e:?}");
    let e = LinkChange::parse(&RawImpair { rate: Some("1mbit".into()), trace: Some("t".into()), ..Default::default() }).unwrap_err();
    assert!(e.1.contains("either a rate or a trace"), "{e:?}");
    let trace = LinkChange::parse(&RawImpair { trace: Some("t.trace".into()), ..Default::default() }).unwrap();
    assert_eq!(trace.apply(&base, false).unwrap().rate_bps, None, "a trace replaces the rate");
}

#[test]
fn the_plan_draws_as_a_graphviz_graph() {
    let p = plan(&example("access.toml"), "access.toml", "a1").unwrap();
    let dot = horde_topo::dot(&p, |s| format!("{} ms", s.delay_ns / 1_000_000), None);
    assert!(dot.starts_with("graph \"") && dot.trim_end().ends_with('}'));
    assert_eq!(dot.matches(" -- ").count(), p.links.len(), "one edge per link");
    assert_eq!(dot.matches("shape=").count(), p.nodes.len(), "one vertex per node");
    assert!(dot.contains("style=bold"), "emulated links stand out");
    // Quotes in names cannot break the graph.
    let mut q = p.clone();
    q.nodes[0].name = "a\"b".into();
    assert!(horde_topo::dot(&q, |_| String::new(), None).contains("\"a\\\"b\""));
}

/// An experiment keeps its plan as JSON (`emu up` writes it, every later `emu` command reads it)
/// instead of planning its text again: the round trip loses nothing.
#[test]
fn a_plan_survives_its_json_round_trip() {
    for f in ["access.toml", "vw-access.toml", "seed-testbed.toml"] {
        let p = plan(&example(f), f, "rt").unwrap();
        let back: horde_topo::Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p, "{f}");
    }
}

/// Issue 48: a link's queue is the default (100 ms at its rate) without `queue`, "unbounded"
/// only when asked; a live change may ask for either, or a size.
#[test]
fn a_queue_is_finite_unless_asked_to_be_unbounded() {
    let topo = |queue: &str| {
        format!("name = \"q\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"20mbit\"\n{queue}")
    };
    let p = plan(&topo(""), "q.toml", "q").unwrap();
    assert_eq!((p.links[0].ab.queue_limit(), p.links[0].ab.queue_is_default()), (Some(250_000), true));
    let p = plan(&topo("queue = \"unbounded\"\n"), "q.toml", "q").unwrap();
    assert_eq!((p.links[0].ba.queue_limit(), p.links[0].ba.queue_unbounded), (None, true));
    let p = plan(&topo("queue = \"64kB\"\n"), "q.toml", "q").unwrap();
    assert_eq!(p.links[0].ab.queue_limit(), Some(64_000));
    let e = plan(&topo("queue = \"lots\"\n"), "q.toml", "q").unwrap_err().to_string();
    assert!(e.contains("queue") && e.contains("unbounded"), "{e}");

    let base = plan(&topo("queue = \"64kB\"\n"), "q.toml", "q").unwrap().links[0].ab.clone();
    let change = |q: &str| horde_topo::LinkChange::parse(&horde_topo::RawImpair { queue: Some(q.into()), ..Default::default() }).unwrap();
    let unbounded = change("unbounded").apply(&base, false).unwrap();
    assert_eq!((unbounded.queue_limit(), unbounded.queue_unbounded), (None, true));
    let back = change("default").apply(&unbounded, false).unwrap();
    assert_eq!((back.queue_limit(), back.queue_is_default()), (Some(250_000), true));
    assert_eq!(change("32kB").apply(&unbounded, false).unwrap().queue_limit(), Some(32_000));
    // a change without a queue keeps the one there
    let rate = horde_topo::LinkChange::parse(&horde_topo::RawImpair { rate: Some("2mbit".into()), ..Default::default() }).unwrap();
    assert!(rate.apply(&unbounded, false).unwrap().queue_unbounded);
    assert_eq!(rate.apply(&back, false).unwrap().queue_limit(), Some(25_000), "the default follows the rate");
}

/// The links between two nodes, in order and in the direction crossed: from a client of the
/// ISP example through its switch and both routers to the server, and back the other way.
#[test]
fn a_path_names_the_links_it_crosses_and_their_direction() {
    let p = plan(&example("isp.toml"), "isp.toml", "x").unwrap();
    let (c, s) = (p.hosts_of("client").unwrap()[7], p.node("server").unwrap());
    let names = |path: &[horde_topo::Crossing]| {
        path.iter()
            .map(|x| {
                let l = &p.links[x.link];
                let (from, to) = if x.forward { (l.a.node, l.b.node) } else { (l.b.node, l.a.node) };
                format!("{}>{}", p.nodes[from].name, p.nodes[to].name)
            })
            .collect::<Vec<_>>()
    };
    let up = p.path_links(c, s).unwrap();
    assert_eq!(names(&up), [format!("{}>sw1", p.nodes[c].name), "sw1>r1".into(), "r1>r2".into(), "r2>server".into()]);
    let r12 = up[2];
    assert!(r12.forward && p.links[r12.link].ab.rate_bps == Some(20_000_000), "r1 → r2 is the rated link's a → b");
    let down = p.path_links(s, c).unwrap();
    assert_eq!(down.len(), 4);
    assert!(!down[1].forward && down[1].link == r12.link, "back across it from b to a");
    assert_eq!(p.path_links(s, s), Some(Vec::new()));
    assert_eq!(p.path_links(s, 10_000), None);
}
