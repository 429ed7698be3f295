//! D-ITG's multi-flow scripts as they are (`horde send --ditg-script FILE`): one `ITGSend`
//! option line per flow, read with D-ITG 2.8.1's meanings (its manual, §3.2.3) into Horde's
//! flows. Whatever Horde cannot do the way D-ITG means it is refused, naming the line and the
//! option; nothing is silently dropped.
//!
//! Meanings kept from D-ITG: defaults `-a 127.0.0.1 -rp 8999 -T UDP -C 1000 -c 512 -t 10000`;
//! for `-C`, `-U`, `-E`, `-O` every parameter is a rate in packets per second, turned into an
//! inter-departure time of 1000/x ms; the other IDT distributions (`-N`, `-V`, `-Y`, `-G`, `-W`)
//! take milliseconds, `-B` on/off periods too; sizes are bytes; `-k` counts KBytes of 1,024
//! bytes; `-s` is a seed in [0, 1]; TCP flows keep Nagle's algorithm unless the line says `-D`;
//! an application preset (`Telnet`, `DNS`, `Quake3`, `CSa`, `CSi`, `VoIP [-x codec] [-h RTP|CRTP]
//! [-VAD]`) comes last and excludes IDT and size options; Telnet is TCP and Quake3, CSa, CSi and
//! VoIP are UDP whatever `-T` says (D-ITG ignores it; a note says so).

use crate::flow::{Quantity, RawFlow};

/// A line Horde cannot read as D-ITG means it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("D-ITG script line {line}: {option}: {msg}")]
pub struct ScriptError {
    pub line: usize,
    pub option: String,
    pub msg: String,
}

/// One flow of a script: the flow, its line, and what D-ITG would have ignored on it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptFlow {
    pub line: usize,
    pub flow: RawFlow,
    pub notes: Vec<String>,
}

/// D-ITG's options Horde does not take, and why (the rest are unknown to D-ITG too).
const REFUSED: &[(&str, &str)] = &[
    ("-l", "logging goes on horde send's own command line (--log), as D-ITG wants it on ITGSend's, not in the script"),
    ("-x", "the receiver's log is horde recv's --log"),
    ("-L", "a log server is horde send --log-server (ITGLog's role is horde logd)"),
    ("-X", "a log server is horde recv --log-server"),
    ("-q", "Horde's logs are written in batches by their own thread; there is no buffer size to set"),
    ("-Sda", "Horde has no separate signalling channel: a flow's hello travels on the flow itself"),
    ("-Sdp", "Horde has no separate signalling channel: a flow's hello travels on the flow itself"),
    ("-Ssa", "Horde has no separate signalling channel: a flow's hello travels on the flow itself"),
    ("-Ssp", "Horde has no separate signalling channel: a flow's hello travels on the flow itself"),
    ("-Si", "Horde has no separate signalling channel: a flow's hello travels on the flow itself"),
    ("-H", "passive mode (NAT traversal) is not implemented: the sender connects to the receiver"),
    ("-i", "binding to an interface is not implemented: give the interface's address with -sa"),
    ("-p", "Horde's payload always carries its own header (flow, sequence number, send time)"),
    ("-Ft", "IDTs from a file are not implemented: use a distribution"),
    ("-Fs", "sizes from a file are not implemented: use a distribution"),
    ("-Fp", "payload contents from a file are not implemented"),
    ("-sk", "serial-line signals are not implemented"),
    ("-rk", "serial-line signals are not implemented"),
    ("-Q", "daemon mode is horde agent"),
];

/// Presets: D-ITG's name → Horde's preset, and the transport D-ITG forces (None: the line's).
const PRESETS: &[(&str, &str, Option<&str>)] = &[
    ("telnet", "telnet", Some("tcp")),
    ("dns", "dns", None),
    ("quake3", "quake3", Some("udp")),
    ("csa", "csa", Some("udp")),
    ("csi", "csi", Some("udp")),
    ("voip", "voip", Some("udp")),
];

/// The most flows a script may have (as a flow file).
pub const MAX_LINES: usize = crate::flow::MAX_FLOWS;

/// Reads a whole script. Blank lines and lines starting with `#` are skipped.
pub fn parse_script(text: &str) -> Result<Vec<ScriptFlow>, ScriptError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if out.len() >= MAX_LINES {
            return Err(ScriptError { line: line_no, option: "script".into(), msg: format!("more than {MAX_LINES} flows") });
        }
        out.push(parse_line(t, line_no)?);
    }
    if out.is_empty() {
        return Err(ScriptError { line: 0, option: "script".into(), msg: "no flow lines (one line of ITGSend options per flow)".into() });
    }
    Ok(out)
}

struct Line<'a> {
    toks: Vec<&'a str>,
    at: usize,
    no: usize,
}

impl<'a> Line<'a> {
    fn err(&self, option: &str, msg: impl Into<String>) -> ScriptError {
        ScriptError { line: self.no, option: option.to_string(), msg: msg.into() }
    }

    fn word(&mut self, option: &str, what: &str) -> Result<&'a str, ScriptError> {
        let w = self.toks.get(self.at).copied().ok_or_else(|| self.err(option, format!("needs {what}")))?;
        self.at += 1;
        Ok(w)
    }

    /// A finite number; `positive`: > 0.
    fn num(&mut self, option: &str, what: &str, positive: bool) -> Result<f64, ScriptError> {
        let w = self.word(option, what)?;
        let x: f64 = w.parse().map_err(|_| self.err(option, format!("{what} must be a number (got `{w}`)")))?;
        if !x.is_finite() || (positive && x <= 0.0) || x < 0.0 {
            return Err(self.err(option, format!("{what} must be {} (got `{w}`)", if positive { "> 0" } else { ">= 0" })));
        }
        Ok(x)
    }

    fn int(&mut self, option: &str, what: &str, max: u64) -> Result<u64, ScriptError> {
        let w = self.word(option, what)?;
        let v = match w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => w.parse::<u64>().ok(),
        };
        v.filter(|v| *v <= max).ok_or_else(|| self.err(option, format!("{what} must be an integer 0..={max} (got `{w}`)")))
    }

    /// A distribution by D-ITG's letter (`C U E N O V Y G W`, upper case: IDTs; lower: sizes).
    /// `rates`: C/U/E/O parameters are packet rates (IDTs), turned into 1000/x ms.
    fn dist(&mut self, option: &str, letter: char, rates: bool) -> Result<String, ScriptError> {
        let inv = |x: f64| if rates { 1000.0 / x } else { x };
        Ok(match letter.to_ascii_uppercase() {
            'C' => format!("constant({})", inv(self.num(option, "the value", true)?)),
            'U' => {
                let (a, b) = (inv(self.num(option, "the minimum", true)?), inv(self.num(option, "the maximum", true)?));
                format!("uniform({}, {})", a.min(b), a.max(b))
            }
            'E' => format!("exponential({})", inv(self.num(option, "the mean", true)?)),
            'O' => format!("poisson({})", inv(self.num(option, "the mean", true)?)),
            'N' => format!("normal({}, {})", self.num(option, "the mean", false)?, self.num(option, "the standard deviation", true)?),
            'V' => format!("pareto({}, {})", self.num(option, "the shape", true)?, self.num(option, "the scale", true)?),
            'Y' => format!("cauchy({}, {})", self.num(option, "the shape (location)", false)?, self.num(option, "the scale", true)?),
            'G' => format!("gamma({}, {})", self.num(option, "the shape", true)?, self.num(option, "the scale", true)?),
            'W' => {
                let (shape, scale) = (self.num(option, "the shape", true)?, self.num(option, "the scale", true)?);
                format!("weibull({scale}, {shape})")
            }
            _ => return Err(self.err(option, format!("unknown distribution `{letter}`; D-ITG's are C U E N O V Y G W"))),
        })
    }
}

fn text(s: String) -> Option<Quantity> {
    Some(Quantity::Text(s))
}

/// The rest of a line after preset `name` (written `opt`): nothing, or VoIP's sub-options.
fn preset_rest(l: &mut Line, name: &str, opt: &str) -> Result<String, ScriptError> {
    let mut voip = Vec::new();
    while l.at < l.toks.len() {
        let sub = l.word(opt, "")?;
        match (name, sub) {
            ("voip", "-x") => {
                let c = l.word("-x", "a codec (G.711.1, G.711.2, G.729.2, G.729.3, G.723.1)")?;
                voip.push(format!("codec={c}"));
            }
            ("voip", "-h") => {
                let h = l.word("-h", "RTP or CRTP")?;
                voip.push(format!("rtp={}", h.to_ascii_lowercase()));
            }
            ("voip", "-VAD") => voip.push("vad=on".into()),
            _ => return Err(l.err(sub, format!("an application preset ({opt}) is the last option of a line; only VoIP takes -x, -h and -VAD after it"))),
        }
    }
    Ok(if voip.is_empty() { name.to_string() } else { format!("voip({})", voip.join(", ")) })
}

fn parse_line(t: &str, no: usize) -> Result<ScriptFlow, ScriptError> {
    let mut l = Line { toks: t.split_whitespace().collect(), at: 0, no };
    let mut f = RawFlow { name: Some(format!("line{no}")), ..Default::default() };
    let mut notes = Vec::new();
    let (mut host, mut port, mut src_host, mut src_port) = ("127.0.0.1".to_string(), 8999u64, None::<String>, None::<u64>);
    let mut nagle_off = false;
    let mut preset: Option<(&str, Option<&str>)> = None;
    let mut idt_given = None::<String>;
    let mut size_given = None::<String>;
    while l.at < l.toks.len() {
        let opt = l.word("", "")?;
        if let Some(p) = PRESETS.iter().find(|p| p.0.eq_ignore_ascii_case(opt)) {
            preset = Some((p.1, p.2));
            f.preset = Some(preset_rest(&mut l, p.0, opt)?);
            break;
        }
        match opt {
            "-a" => host = l.word(opt, "the destination address")?.to_string(),
            "-rp" => port = l.int(opt, "the destination port", 65535)?,
            "-sa" => src_host = Some(l.word(opt, "the source address")?.to_string()),
            "-sp" => src_port = Some(l.int(opt, "the source port", 65535)?),
            "-T" => {
                let p = l.word(opt, "a protocol (UDP, TCP, ICMP, SCTP, DCCP)")?;
                match p.to_ascii_uppercase().as_str() {
                    // ICMP: echo requests (raw sockets: root), as D-ITG's -T ICMP sends.
                    "UDP" | "TCP" | "ICMP" => f.transport = Some(p.to_ascii_lowercase()),
                    "SCTP" | "DCCP" => return Err(l.err(opt, format!("Horde does not send {p} (this kernel has neither SCTP nor DCCP; docs/cli.md)"))),
                    _ => return Err(l.err(opt, format!("unknown protocol `{p}`; D-ITG's are UDP, TCP, ICMP, SCTP, DCCP"))),
                }
            }
            "-C" | "-U" | "-E" | "-N" | "-O" | "-V" | "-Y" | "-G" | "-W" => {
                if let Some(prev) = &idt_given {
                    return Err(l.err(opt, format!("a second inter-departure time option (after {prev})")));
                }
                let c = opt.chars().nth(1).unwrap_or('C');
                f.idt = text(l.dist(opt, c, matches!(c, 'C' | 'U' | 'E' | 'O'))?);
                idt_given = Some(opt.to_string());
            }
            "-c" | "-u" | "-e" | "-n" | "-o" | "-v" | "-y" | "-g" | "-w" => {
                if let Some(prev) = &size_given {
                    return Err(l.err(opt, format!("a second packet size option (after {prev})")));
                }
                let c = opt.chars().nth(1).unwrap_or('c');
                f.size = text(l.dist(opt, c, false)?);
                size_given = Some(opt.to_string());
            }
            "-B" => {
                let on = l.word(opt, "the ON period's distribution letter")?;
                let on = l.dist("-B", on.chars().next().unwrap_or('?'), false)?;
                let off = l.word(opt, "the OFF period's distribution letter")?;
                let off = l.dist("-B", off.chars().next().unwrap_or('?'), false)?;
                (f.on, f.off) = (text(on), text(off));
            }
            "-t" => f.duration = text(format!("{}ms", l.num(opt, "the duration in ms", true)?)),
            "-z" => f.packets = Some(Quantity::Int(l.int(opt, "the number of packets", i64::MAX as u64)? as i64)),
            "-k" => {
                let kb = l.int(opt, "the number of KBytes", (i64::MAX as u64) / 1024)?;
                f.bytes = Some(Quantity::Int((kb * 1024) as i64));
            }
            "-d" => f.start_delay = text(format!("constant({})", l.num(opt, "the delay in ms", false)?)),
            "-b" => f.tos = Some(l.int(opt, "the DS byte", 255)? as u8),
            "-f" => f.ttl = Some(l.int(opt, "the TTL", 255)? as u8),
            "-m" => {
                let m = l.word(opt, "owdm or rttm")?;
                f.meter = Some(
                    match m.to_ascii_lowercase().as_str() {
                        "owdm" => "owd",
                        "rttm" => "rtt",
                        _ => return Err(l.err(opt, format!("the meter must be owdm or rttm (got `{m}`)"))),
                    }
                    .into(),
                );
            }
            "-s" => {
                let s = l.num(opt, "the seed, in [0, 1]", false)?;
                if s > 1.0 {
                    return Err(l.err(opt, format!("D-ITG's seed is in [0, 1] (got {s})")));
                }
                f.seed = Some((s * (1u64 << 53) as f64) as u64);
            }
            "-D" => nagle_off = true,
            "-j" => {
                if l.int(opt, "0 or 1", 1)? == 0 {
                    return Err(l.err(opt, "-j 0 (let a late sender fall behind) is not offered: Horde keeps the schedule and reports lateness"));
                }
            }
            "-poll" => notes.push("-poll: Horde paces every departure precisely by itself (it spins the last microseconds before it)".to_string()),
            _ => {
                return Err(match REFUSED.iter().find(|r| r.0 == opt) {
                    Some((_, why)) => l.err(opt, format!("not taken: {why}")),
                    None => l.err(opt, "not an ITGSend option Horde knows (D-ITG 2.8.1's manual, §3.2.3)"),
                });
            }
        }
    }
    if let Some((_, forced)) = preset {
        if let Some(prev) = idt_given.as_ref().or(size_given.as_ref()) {
            return Err(l.err(prev, "an application preset gives the flow's timing and sizes: drop the IDT and size options (D-ITG refuses them too)"));
        }
        if let Some(t) = forced {
            if f.transport.as_deref().is_some_and(|x| x != t) {
                notes.push(format!(
                    "-T {} ignored: D-ITG's {} preset is {}",
                    f.transport.as_deref().unwrap_or(""),
                    f.preset.as_deref().unwrap_or(""),
                    t.to_uppercase()
                ));
            }
            f.transport = Some(t.to_string());
        }
    } else {
        if idt_given.is_none() {
            f.rate = Some(Quantity::Float(1000.0));
        }
        if size_given.is_none() {
            f.size = text("constant(512)".into());
        }
    }
    if f.duration.is_none() {
        // D-ITG's -t defaults to 10 s; -z and -k stop a flow earlier, never later.
        f.duration = text("10000ms".into());
    }
    let is_tcp = f.transport.as_deref() == Some("tcp");
    if is_tcp {
        // D-ITG leaves Nagle's algorithm on unless -D.
        f.nodelay = Some(nagle_off);
    } else if nagle_off {
        notes.push("-D ignored: Nagle's algorithm is TCP's".into());
    }
    let join = |h: &str, p: u64| if h.contains(':') && !h.starts_with('[') { format!("[{h}]:{p}") } else { format!("{h}:{p}") };
    f.dst = Some(join(&host, port));
    f.src = match (src_host, src_port) {
        (Some(h), p) => Some(join(&h, p.unwrap_or(0))),
        (None, Some(p)) => Some(join(if host.contains(':') { "::" } else { "0.0.0.0" }, p)),
        (None, None) => None,
    };
    Ok(ScriptFlow { line: no, flow: f, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> crate::flow::Flow {
        let s = parse_script(line).unwrap();
        s[0].flow.resolve(0, 1, "line 1").unwrap()
    }

    #[test]
    fn defaults_and_rates_mean_what_they_mean_in_ditg() {
        let f = one("-rp 10001");
        assert_eq!((f.dst.to_string(), f.transport, f.idt.mean(), f.size.mean()), ("127.0.0.1:10001".into(), crate::Transport::Udp, Some(1.0), Some(512.0)));
        assert_eq!(f.stop.duration_ns, Some(10_000_000_000));
        let f = one("-a 10.0.0.3 -rp 10002 -T TCP -E 200 -u 100 300 -t 5000 -d 250 -b 0xb8 -f 17 -m rttm -s 0.5");
        assert_eq!((f.idt.mean(), f.size.mean(), f.tos, f.ttl), (Some(5.0), Some(200.0), Some(0xb8), Some(17)));
        assert_eq!((f.start_delay.mean(), f.meter, f.nodelay), (Some(250.0), crate::Meter::Rtt, false), "TCP keeps Nagle without -D");
        assert!(one("-T TCP -D").nodelay);
        let f = one("-U 100 400 -z 50 -k 3");
        assert_eq!((f.idt.mean(), f.stop.packets, f.stop.bytes), (Some(6.25), Some(50), Some(3072)));
        let f = one("-W 2 10 -w 1.5 300");
        assert_eq!(f.idt.to_string(), "weibull(10, 2)");
        let f = one("-B E 100 W 10 100");
        let (on, off) = f.on_off.unwrap();
        assert_eq!((on.mean(), off.to_string()), (Some(100.0), "weibull(100, 10)".into()));
        assert_eq!(one("-a ::1 -rp 9 -sp 4000").src.unwrap().to_string(), "[::]:4000");
    }

    #[test]
    fn presets_come_last_and_force_their_transport() {
        let s = parse_script("-a 10.0.0.3 -rp 10001 VoIP -x G.729.2 -h CRTP -VAD\n-rp 2 -T TCP Quake3\n-rp 3 -T TCP DNS\n-rp 4 Telnet").unwrap();
        let f: Vec<_> = s.iter().map(|l| l.flow.resolve(0, 1, "l").unwrap()).collect();
        assert_eq!((f[0].idt.mean(), f[0].size.mean()), (Some(20.0), Some(15.0)));
        assert_eq!((f[1].transport, f[2].transport, f[3].transport), (crate::Transport::Udp, crate::Transport::Tcp, crate::Transport::Tcp));
        assert!(s[1].notes[0].contains("-T tcp ignored"), "{:?}", s[1].notes);
        let e = parse_script("-C 10 Quake3").unwrap_err();
        assert_eq!((e.line, e.option.as_str()), (1, "-C"));
        let e = parse_script("Quake3 -a 1.2.3.4").unwrap_err();
        assert!(e.msg.contains("last option"), "{e}");
    }

    #[test]
    fn icmp_lines_are_echo_flows() {
        let f = one("-a 10.0.0.2 -T ICMP -C 50 -c 100");
        assert_eq!((f.transport, f.dst.ip().to_string(), f.size.mean()), (crate::Transport::Icmp, "10.0.0.2".into(), Some(100.0)));
    }

    #[test]
    fn what_horde_does_not_do_is_refused_by_name() {
        for (line, opt) in [
            ("-rp 1 -l x.log", "-l"),
            ("-H", "-H"),
            ("-rp 1\n-Sdp 9000", "-Sdp"),
            ("-j 0", "-j"),
            ("-zz 3", "-zz"),
            ("-T ICMPX", "-T"),
            ("-C", "-C"),
            ("-C -5", "-C"),
            ("-C 1 -E 2", "-E"),
        ] {
            let e = parse_script(line).unwrap_err();
            assert_eq!(e.option, opt, "{line}: {e}");
        }
        assert_eq!(parse_script("# only a comment\n\n").unwrap_err().line, 0);
        assert!(parse_script("-T SCTP 3 1").unwrap_err().msg.contains("SCTP"));
    }
}
