//! Named traffic models (D-ITG 2.8.1 application presets), parameters from
//! `docs/models.md` §2 (source: D-ITG src/ITGSend/traffic.cpp).
//! Text form: `NAME` or `NAME(key=value, ...)`, e.g. `voip(codec=g729.2, rtp=crtp, vad=on)`.

use crate::dist::Dist;
use crate::transport::Transport;

#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: String,
    pub transport: Transport,
    /// Milliseconds.
    pub idt: Dist,
    /// Bytes.
    pub size: Dist,
}

/// VoIP codecs: (name, frame size in bytes, samples per packet, packets per second).
pub const CODECS: &[(&str, f64, f64, f64)] =
    &[("g711.1", 80.0, 1.0, 100.0), ("g711.2", 80.0, 2.0, 50.0), ("g729.2", 10.0, 2.0, 50.0), ("g729.3", 10.0, 3.0, 33.0), ("g723.1", 30.0, 1.0, 26.0)];
/// RTP header (12 B) and compressed RTP header (2 B), as D-ITG adds them.
const RTP_HEADER: f64 = 12.0;
const CRTP_HEADER: f64 = 2.0;
/// D-ITG's voice-activity factor applied to the payload when VAD is on.
const VAD_FACTOR: f64 = 0.65;

pub const NAMES: &[&str] = &["voip", "telnet", "dns", "quake3", "csa", "csi"];

fn d(s: &str) -> Dist {
    s.parse::<Dist>().map(|d| d.validate().expect("built-in preset is valid")).expect("built-in preset parses")
}

impl std::str::FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Preset, String> {
        let s = s.trim();
        let (name, args) = match s.find('(') {
            Some(i) if s.ends_with(')') => (&s[..i], &s[i + 1..s.len() - 1]),
            Some(_) => return Err(format!("`{s}`: expected `)` at the end")),
            None => (s, ""),
        };
        let mut kv = Vec::new();
        for part in args.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}`: preset options are key=value"))?;
            kv.push((k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase()));
        }
        let name = name.trim().to_ascii_lowercase();
        if name != "voip" && !kv.is_empty() {
            return Err(format!("preset `{name}` takes no options"));
        }
        let p = |transport, idt: &str, size: &str| Preset { name: name.clone(), transport, idt: d(idt), size: d(size) };
        Ok(match name.as_str() {
            "voip" => return voip(&kv),
            "telnet" => p(
                Transport::Tcp,
                "pareto(0.95, 1, mul=1.1)",
                "discrete(0:0.65, 1:0.13, 2:0.07, 3:0.05, 4:0.03, 5:0.01, 6:0.01, 7:0.01, 8:0.01, 9:0.005, 10:0.005, 11:0.005, 12:0.005, 13:0.005, 14:0.005, shift=21)",
            ),
            "dns" => p(Transport::Udp, "constant(1785.71)", "uniform(100, 320)"),
            "quake3" => p(Transport::Udp, "mix(0.6*exponential(4.29), 0.4*constant(10.75))", "normal(64.151757, 3.2035755)"),
            "csa" => p(Transport::Udp, "student_t(41.6994, 0.104821, 0.704073, min=0)", "mix(0.3732*normal(34.8352, 4.3915), 0.6268*normal(49.4904, 3.6186))"),
            "csi" => p(Transport::Udp, "student_t(41.6858, 0.0694393, 1.08341, min=0)", "discrete(27:0.8312, 28:0.0018, 29:0.0453, 30:0.0195, 31:0.0879, 32:0.0024, 33:0.0106, 35:0.0013)"),
            _ => return Err(format!("unknown preset `{name}`; use one of: {}", NAMES.join(", "))),
        })
    }
}

fn voip(kv: &[(String, String)]) -> Result<Preset, String> {
    let (mut codec, mut header, mut vad) = (CODECS[0], RTP_HEADER, 1.0);
    for (k, v) in kv {
        match k.as_str() {
            "codec" => {
                let norm = |s: &str| s.chars().filter(|c| c.is_ascii_digit()).collect::<String>();
                codec = *CODECS
                    .iter()
                    .find(|c| norm(c.0) == norm(v))
                    .ok_or_else(|| format!("voip: unknown codec `{v}`; use one of: {}", CODECS.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")))?;
            }
            "rtp" => {
                header = match v.as_str() {
                    "rtp" | "on" => RTP_HEADER,
                    "crtp" | "compressed" => CRTP_HEADER,
                    _ => return Err(format!("voip: rtp must be rtp or crtp (got `{v}`)")),
                }
            }
            "vad" => {
                vad = match v.as_str() {
                    "on" | "yes" | "true" => VAD_FACTOR,
                    "off" | "no" | "false" => 1.0,
                    _ => return Err(format!("voip: vad must be on or off (got `{v}`)")),
                }
            }
            _ => return Err(format!("voip has no option `{k}`; use codec, rtp, vad")),
        }
    }
    let (_, frame, samples, pps) = codec;
    Ok(Preset {
        name: "voip".into(),
        transport: Transport::Udp,
        idt: Dist::constant(1000.0 / pps),
        size: Dist::constant((vad * frame * samples + header).round()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voip_sizes_follow_ditg() {
        let p: Preset = "voip(codec=g711.1)".parse().unwrap();
        assert_eq!((p.idt.mean(), p.size.mean()), (Some(10.0), Some(92.0)));
        let p: Preset = "voip(codec=G.729.2, rtp=crtp, vad=on)".parse().unwrap();
        assert_eq!((p.idt.mean(), p.size.mean()), (Some(20.0), Some(15.0)));
        let p: Preset = "voip(codec=g723.1)".parse().unwrap();
        assert_eq!(p.size.mean(), Some(42.0));
        assert!("voip(codec=g999)".parse::<Preset>().unwrap_err().contains("unknown codec"));
    }

    #[test]
    fn every_named_preset_builds() {
        for n in NAMES {
            let p: Preset = n.parse().unwrap();
            assert_eq!(&p.name, n);
        }
        let t: Preset = "telnet".parse().unwrap();
        assert_eq!(t.transport, Transport::Tcp);
        assert!(
            (t.size.mean().unwrap() - (21.0 + 0.13 + 0.14 + 0.15 + 0.12 + 0.05 + 0.06 + 0.07 + 0.08 + 0.005 * (9.0 + 10.0 + 11.0 + 12.0 + 13.0 + 14.0))).abs()
                < 1e-9
        );
        assert!("doom".parse::<Preset>().unwrap_err().contains("unknown preset"));
    }
}
