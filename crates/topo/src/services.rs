//! A host's or router's services (`services = [...]` in the topology file): commands the
//! emulator starts in the node when the topology comes up and ends when it goes down, as
//! IMUNES's Host node starts its inetd and rpcbind. Each is a command line split into words as
//! a shell splits them (quotes and backslashes), not run by a shell: `sh -c '…'` where one is
//! wanted. Pure: the words are checked here, started by `horde_emu`.

use crate::Kind;

/// The most services one node may have.
pub const MAX_SERVICES: usize = 16;
/// The longest command line of one service, bytes.
pub const MAX_SERVICE_LEN: usize = 4096;

/// The services of a node of `kind` (`external`: an interface of this machine), as words.
pub(crate) fn resolve(kind: Kind, external: bool, services: Option<&[String]>) -> Result<Vec<Vec<String>>, (String, String)> {
    let Some(list) = services else { return Ok(Vec::new()) };
    let field = |k: usize| format!("services[{k}]");
    if kind.is_l2() || external {
        return Err(("services".into(), "only a host or router runs services (a switch, hub or external interface has no namespace of its own)".into()));
    }
    if list.len() > MAX_SERVICES {
        return Err(("services".into(), format!("at most {MAX_SERVICES} per node (got {})", list.len())));
    }
    let mut out = Vec::with_capacity(list.len());
    for (k, s) in list.iter().enumerate() {
        if s.len() > MAX_SERVICE_LEN || s.contains('\0') {
            return Err((field(k), format!("must be a command line of at most {MAX_SERVICE_LEN} bytes, without NUL")));
        }
        let words = shell_words::split(s).map_err(|e| (field(k), format!("is not a command line ({e}): quote it as a shell would")))?;
        if words.is_empty() {
            return Err((field(k), "is empty: give the command to start, e.g. \"python3 -m http.server 8080\"".into()));
        }
        out.push(words);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_services_words_are_a_shells_and_bad_ones_are_named() {
        let list = vec!["python3 -m http.server 8080".to_string(), "sh -c 'echo a  b > f'".to_string()];
        let got = resolve(Kind::Host, false, Some(&list)).unwrap();
        assert_eq!(got[0], ["python3", "-m", "http.server", "8080"]);
        assert_eq!(got[1], ["sh", "-c", "echo a  b > f"]);
        assert!(resolve(Kind::Switch, false, Some(&list)).unwrap_err().1.contains("only a host or router"));
        assert!(resolve(Kind::Host, true, Some(&list)).is_err(), "an external interface");
        assert_eq!(resolve(Kind::Host, false, Some(&["sh -c 'open".into()])).unwrap_err().0, "services[0]");
        assert!(resolve(Kind::Host, false, Some(&["  ".into()])).unwrap_err().1.contains("is empty"));
        assert!(resolve(Kind::Router, false, Some(&vec!["true".to_string(); 17])).is_err());
        assert!(resolve(Kind::Host, false, None).unwrap().is_empty());
    }
}
