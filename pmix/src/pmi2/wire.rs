//! PMI-2 messages as they travel over the `PMI_FD` socket (MPICH `src/pmi/pmi2`, Slurm
//! `src/plugins/mpi/pmi2/client.c`, `pmi2.c`, `agent.c`).
//!
//! Parts: the PMI-1 style greeting that opens the connection ([`INIT_LINE`],
//! [`decode_init_response`]: one `\n`-terminated line of space-separated `key=value`
//! pairs), then PMI-2 frames: a 6-character decimal length, left-aligned and padded
//! with spaces (`"%-6d"`), followed by that many bytes of `cmd=NAME;key=value;...;`
//! ([`encode`], [`read_frame`], [`Msg::decode`]). Slurm does not unescape `;;`, so no
//! `;` may appear in a key or value, and no `=` in a key; values runthrough sends are
//! hex or plain words.
//!
//! Every byte here comes from another process: decoding never panics, and never
//! allocates more than the bytes present or [`MAX_BODY_BYTES`] (`docs/UNTRUSTED.md`).

use std::io::Read;

use crate::Error;

/// The first line a client writes (PMI-1 syntax, asking for PMI-2.0).
pub const INIT_LINE: &[u8] = b"cmd=init pmi_version=2 pmi_subversion=0\n";
/// Longest greeting line read back.
pub const MAX_LINE_BYTES: usize = 1024;
/// Longest frame body accepted (a PMI-2 value is at most 1024 bytes; a frame holds a
/// few of them).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Length of the frame length prefix.
pub const PREFIX_BYTES: usize = 6;

/// One decoded PMI-2 message: its command and its `key=value` pairs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    /// The `cmd=` value.
    pub cmd: String,
    /// The other pairs, in order (keys may repeat).
    pub pairs: Vec<(String, String)>,
}

impl Msg {
    /// The value of the first pair named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The integer `rc` of a response (0 when absent, as Slurm and MPICH read it).
    ///
    /// # Errors
    /// [`Error::Protocol`] when `rc` is not an integer.
    pub fn rc(&self) -> Result<i32, Error> {
        match self.get("rc") {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| Error::Protocol(format!("{}: rc={v:?} is not an integer", self.cmd))),
        }
    }

    /// Decodes a frame body (`cmd=NAME;key=value;...;`).
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the body is UTF-8 without newlines, starts with a
    /// non-empty `cmd=` field (no `=` in the command), and every field is a non-empty
    /// key, `=`, a value, then `;`.
    pub fn decode(body: &[u8]) -> Result<Msg, Error> {
        let text = std::str::from_utf8(body).map_err(|_| Error::Protocol("frame is not UTF-8".into()))?;
        if text.contains('\n') {
            return Err(Error::Protocol("newline in a frame".into()));
        }
        let fields = text.strip_suffix(';').ok_or_else(|| Error::Protocol("frame does not end with ';'".into()))?;
        let mut it = fields.split(';');
        let first = it.next().unwrap_or_default();
        let cmd = first
            .strip_prefix("cmd=")
            .filter(|c| !c.is_empty() && !c.contains('='))
            .ok_or_else(|| Error::Protocol("frame does not start with a cmd".into()))?;
        let mut pairs = Vec::new();
        for f in it {
            let (k, v) = f.split_once('=').ok_or_else(|| Error::Protocol(format!("{cmd}: field without '='")))?;
            if k.is_empty() {
                return Err(Error::Protocol(format!("{cmd}: empty key")));
            }
            pairs.push((k.to_owned(), v.to_owned()));
        }
        Ok(Msg { cmd: cmd.to_owned(), pairs })
    }

    /// Encodes as a whole frame (length prefix and body).
    ///
    /// # Errors
    /// [`Error::Invalid`] when a key or value cannot be carried (see the module doc) or
    /// the body exceeds [`MAX_BODY_BYTES`].
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let pairs: Vec<(&str, &str)> = self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        encode(&self.cmd, &pairs)
    }
}

/// Encodes a request: `cmd` and `pairs` as a frame (length prefix and body).
///
/// # Errors
/// [`Error::Invalid`] when the command or a key is empty or holds `;`, `=` or a
/// newline, a value holds `;` or a newline, or the body exceeds [`MAX_BODY_BYTES`].
pub fn encode(cmd: &str, pairs: &[(&str, &str)]) -> Result<Vec<u8>, Error> {
    let bad_key = |k: &str| k.is_empty() || k.contains([';', '=', '\n']);
    if bad_key(cmd) {
        return Err(Error::Invalid(format!("PMI-2 command {cmd:?}")));
    }
    let mut body = format!("cmd={cmd};");
    for (k, v) in pairs {
        if bad_key(k) || v.contains([';', '\n']) {
            return Err(Error::Invalid(format!("PMI-2 pair {k:?}={v:?}: ';', '=' in a key or newline")));
        }
        body.push_str(k);
        body.push('=');
        body.push_str(v);
        body.push(';');
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(Error::Invalid(format!("PMI-2 {cmd}: {} bytes, at most {MAX_BODY_BYTES}", body.len())));
    }
    let mut frame = format!("{:<width$}", body.len(), width = PREFIX_BYTES).into_bytes();
    frame.extend_from_slice(body.as_bytes());
    Ok(frame)
}

/// Parses a length prefix: decimal digits, then spaces (Slurm and MPICH write `%-6d`;
/// leading spaces are accepted too).
///
/// # Errors
/// [`Error::Protocol`] for anything else, or a length above [`MAX_BODY_BYTES`].
pub fn parse_prefix(prefix: &[u8; PREFIX_BYTES]) -> Result<usize, Error> {
    let text = std::str::from_utf8(prefix).map_err(|_| Error::Protocol("length prefix is not ASCII".into()))?;
    let digits = text.trim_matches(' ');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Protocol(format!("length prefix {text:?} is not a decimal number")));
    }
    let len: usize = digits.parse().map_err(|_| Error::Protocol(format!("length prefix {text:?}")))?;
    if len > MAX_BODY_BYTES {
        return Err(Error::Protocol(format!("frame of {len} bytes announced, at most {MAX_BODY_BYTES}")));
    }
    Ok(len)
}

/// Reads one frame body off `r` (prefix, then exactly that many bytes).
///
/// # Errors
/// [`Error::Protocol`] for a bad prefix, [`Error::Io`] when the stream ends early or
/// fails.
pub fn read_frame(r: &mut impl Read) -> Result<Vec<u8>, Error> {
    let mut prefix = [0u8; PREFIX_BYTES];
    r.read_exact(&mut prefix)?;
    let len = parse_prefix(&prefix)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// Reads the greeting's answer: bytes up to and including `\n` (at most
/// [`MAX_LINE_BYTES`]), one at a time so nothing after the line is consumed.
///
/// # Errors
/// [`Error::Protocol`] when no newline comes within the limit, [`Error::Io`] on a
/// stream error or end.
pub fn read_line(r: &mut impl Read) -> Result<Vec<u8>, Error> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < MAX_LINE_BYTES {
        r.read_exact(&mut b)?;
        if b[0] == b'\n' {
            return Ok(line);
        }
        line.push(b[0]);
    }
    Err(Error::Protocol(format!("greeting answer longer than {MAX_LINE_BYTES} bytes")))
}

/// Checks the answer to [`INIT_LINE`] (without its `\n`):
/// `cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0`.
///
/// # Errors
/// [`Error::Protocol`] when the line is malformed or another command, [`Error::Pmi2`]
/// when `rc` is not 0 or the server does not speak PMI-2.0.
pub fn decode_init_response(line: &[u8]) -> Result<(), Error> {
    let text = std::str::from_utf8(line).map_err(|_| Error::Protocol("greeting answer is not UTF-8".into()))?;
    let mut pairs = Vec::new();
    for f in text.split(' ').filter(|f| !f.is_empty()) {
        let (k, v) = f.split_once('=').ok_or_else(|| Error::Protocol(format!("greeting field {f:?}")))?;
        pairs.push((k, v));
    }
    let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    if get("cmd") != Some("response_to_init") {
        return Err(Error::Protocol(format!("greeting answered with {text:?}")));
    }
    let rc: i32 = get("rc").unwrap_or("0").parse().map_err(|_| Error::Protocol(format!("greeting rc in {text:?}")))?;
    if rc != 0 || get("pmi_version") != Some("2") {
        return Err(Error::Pmi2 { cmd: "init".into(), rc, msg: format!("server answered {text:?}") });
    }
    Ok(())
}

/// Parses `PMI_process_mapping` (`(vector,(START,NODES,PER_NODE),...)`: blocks of
/// `PER_NODE` consecutive ranks on each of `NODES` nodes from `START`; the pattern
/// repeats when it covers fewer than `size` ranks) into the node of every rank.
///
/// # Errors
/// [`Error::Protocol`] for anything else, or a mapping that covers no rank.
pub fn node_of_ranks(mapping: &str, size: u32) -> Result<Vec<u32>, Error> {
    let bad = || Error::Protocol(format!("PMI_process_mapping {mapping:?}"));
    let inner = mapping.trim().strip_prefix("(vector").and_then(|s| s.strip_suffix(')')).ok_or_else(bad)?;
    let mut pattern: Vec<u32> = Vec::new();
    let mut rest = inner;
    'blocks: while !rest.is_empty() {
        let block = rest.strip_prefix(",(").ok_or_else(bad)?;
        let end = block.find(')').ok_or_else(bad)?;
        let nums: Vec<u32> =
            block[..end].split(',').map(|n| n.trim().parse::<u32>()).collect::<Result<_, _>>().map_err(|_| bad())?;
        let [start, nodes, per_node] = nums[..] else { return Err(bad()) };
        rest = &block[end + 1..];
        for node in 0..nodes {
            let node = start.checked_add(node).ok_or_else(bad)?;
            for _ in 0..per_node {
                if pattern.len() >= size as usize {
                    break 'blocks;
                }
                pattern.push(node);
            }
        }
    }
    if pattern.is_empty() {
        return Err(bad());
    }
    Ok((0..size as usize).map(|r| pattern[r % pattern.len()]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_length_prefixed_and_semicolon_terminated() {
        let f = encode("kvs-put", &[("key", "fi/3"), ("value", "0a0b")]).unwrap();
        assert_eq!(f, b"32    cmd=kvs-put;key=fi/3;value=0a0b;");
        assert_eq!(read_frame(&mut &f[..]).unwrap(), &f[6..]);
        let m = Msg::decode(&f[6..]).unwrap();
        assert_eq!(m.cmd, "kvs-put");
        assert_eq!(m.get("value"), Some("0a0b"));
        assert_eq!(m.encode().unwrap(), f);
        // As Slurm answers (values may hold '=' and ',').
        let m = Msg::decode(b"cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,4));").unwrap();
        assert_eq!((m.rc().unwrap(), m.get("found"), m.get("value")), (0, Some("TRUE"), Some("(vector,(0,1,4))")));
        assert_eq!(Msg::decode(b"cmd=x;k=a=b;").unwrap().get("k"), Some("a=b"));
        assert_eq!(encode("fullinit", &[]).unwrap(), b"13    cmd=fullinit;");
    }

    #[test]
    fn what_cannot_be_carried_is_refused() {
        assert!(encode("kvs-put", &[("key", "a;b")]).is_err());
        assert!(encode("kvs-put", &[("k=", "v")]).is_err());
        assert!(encode("kvs-put", &[("k", "v;")]).is_err());
        assert!(encode("", &[]).is_err());
        let big = "0".repeat(MAX_BODY_BYTES);
        assert!(encode("kvs-put", &[("k", &big)]).is_err());
    }

    #[test]
    fn malformed_frames_are_errors() {
        for b in [&b""[..], b"cmd=x", b"cmd=;", b"key=v;", b"cmd=x;novalue;", b"cmd=x;=v;", b"\xffcmd=x;"] {
            assert!(Msg::decode(b).is_err(), "{:?}", String::from_utf8_lossy(b));
        }
        for p in [b"      ", b"12x   ", b"-1    ", b"999999", b"1 2   "] {
            assert!(parse_prefix(p).is_err(), "{:?}", String::from_utf8_lossy(p));
        }
        assert_eq!(parse_prefix(b"    12").unwrap(), 12);
        assert!(matches!(read_frame(&mut &b"10    cmd=x;"[..]), Err(Error::Io(_))));
    }

    #[test]
    fn greeting() {
        let mut r = &b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\nrest"[..];
        let line = read_line(&mut r).unwrap();
        decode_init_response(&line).unwrap();
        assert_eq!(r, b"rest");
        assert!(decode_init_response(b"cmd=response_to_init rc=1 pmi_version=2 pmi_subversion=0").is_err());
        assert!(decode_init_response(b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1").is_err());
        assert!(decode_init_response(b"cmd=other rc=0").is_err());
        assert!(read_line(&mut &[b'a'; 2000][..]).is_err());
    }

    #[test]
    fn process_mapping() {
        assert_eq!(node_of_ranks("(vector,(0,1,4))", 4).unwrap(), [0, 0, 0, 0]);
        assert_eq!(node_of_ranks("(vector,(0,2,2))", 4).unwrap(), [0, 0, 1, 1]);
        // Cyclic: the pattern repeats.
        assert_eq!(node_of_ranks("(vector,(0,2,1))", 5).unwrap(), [0, 1, 0, 1, 0]);
        assert_eq!(node_of_ranks("(vector,(0,1,3),(1,1,1))", 4).unwrap(), [0, 0, 0, 1]);
        for bad in ["", "(vector)", "(vector,(0,1))", "(vector,(0,0,4))", "(vector,(a,1,1))", "vector,(0,1,1)"] {
            assert!(node_of_ranks(bad, 4).is_err(), "{bad}");
        }
        // A huge per-node count is cut at the job size, never allocated.
        assert_eq!(node_of_ranks("(vector,(0,1,4294967295))", 2).unwrap(), [0, 0]);
    }
}

#[cfg(test)]
mod untrusted;
