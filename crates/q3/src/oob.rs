//! Out-of-band (connectionless) datagrams: four 0xFF bytes, then a text command. `connect`
//! carries its userinfo Huffman-compressed (adaptive, [`crate::huffman::compress`]).

pub const PREFIX: [u8; 4] = [0xFF; 4];

/// `\xFF\xFF\xFF\xFF` + `text`.
pub fn packet(text: &str) -> Vec<u8> {
    [&PREFIX[..], text.as_bytes()].concat()
}

/// `getchallenge <client challenge> <game name>` (ioquake3's form; older servers ignore the
/// arguments).
pub fn getchallenge(client_challenge: i32, game: &str) -> Vec<u8> {
    packet(&format!("getchallenge {client_challenge} {game}"))
}

/// `connect "<userinfo>"`, the quoted userinfo compressed after the 12-byte head.
pub fn connect(userinfo: &str) -> Vec<u8> {
    let mut p = packet("connect ");
    p.extend_from_slice(&crate::huffman::compress(format!("\"{userinfo}\"").as_bytes()));
    p
}

/// A connectionless reply, split into its first line's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `challengeResponse <challenge> [<client challenge> [<protocol>]]`
    Challenge { challenge: i32, client_challenge: Option<i32>, protocol: Option<i32> },
    /// `connectResponse [<challenge>]`
    Connect,
    /// `print\n<text>`: usually a refusal ("Server is full.").
    Print(String),
    /// `statusResponse`, `infoResponse`, or anything else: its first word.
    Other(String),
}

/// Reads a connectionless reply; `None` if `data` is not one.
pub fn parse(data: &[u8]) -> Option<Reply> {
    let body = data.strip_prefix(&PREFIX[..])?;
    let text = String::from_utf8_lossy(body);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let mut words = first.split_whitespace();
    let cmd = words.next()?;
    let num = |w: Option<&str>| w.and_then(|x| x.parse::<i32>().ok());
    Some(if cmd.eq_ignore_ascii_case("challengeResponse") {
        Reply::Challenge { challenge: num(words.next())?, client_challenge: num(words.next()), protocol: num(words.next()) }
    } else if cmd.eq_ignore_ascii_case("connectResponse") {
        Reply::Connect
    } else if cmd.eq_ignore_ascii_case("print") {
        Reply::Print(rest.trim_end().to_string())
    } else {
        Reply::Other(cmd.to_string())
    })
}

/// Sets `key` in an info string, replacing an earlier value. Keys and values must not contain
/// `\`, `"` or `;` (the engine refuses them); such characters are dropped.
pub fn info_set(info: &mut String, key: &str, value: &str) {
    let clean = |s: &str| s.chars().filter(|c| !matches!(c, '\\' | '"' | ';')).collect::<String>();
    let (key, value) = (clean(key), clean(value));
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut it = info.strip_prefix('\\').unwrap_or(info).split('\\');
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if !k.eq_ignore_ascii_case(&key) {
            pairs.push((k.to_string(), v.to_string()));
        }
    }
    pairs.push((key, value));
    *info = pairs.iter().map(|(k, v)| format!("\\{k}\\{v}")).collect();
}
