//! Traces of what one matching engine saw: every post, arrival, probe and cancel on one
//! communicator of one rank, in order, with what the engine answered. The shim records them
//! (`MATCHSHIM_TRACE=DIR`) through [`Recording`], a [`MatchEngine`] that forwards to the real
//! engine; [`replay`] runs them again through any engine without MPI; [`generate`] writes
//! traces of the same programs at scales no single machine runs.
//!
//! A trace file (`rank<R>-comm<C>.trace`) is `MSHTRACE`, a little-endian u32 format version,
//! a u32 length and that many bytes of JSON [`Header`], then the events: an op byte and
//! LEB128 integers (zigzag for source and tag, whose wildcards are -1).

pub mod generate;
mod record;
pub mod replay;

pub use record::{finish_recording, recorded, start_recording, Recording};

use crate::matching::{Class, Envelope, MsgId, Pattern, RecvId};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The version of the file layout; a trace of another version is refused when read.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"MSHTRACE";

/// One call the engine got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Post { want: Pattern, recv: RecvId },
    Arrive { env: Envelope, msg: MsgId },
    Probe { want: Pattern, remove: bool },
    Cancel { recv: RecvId },
}

/// A call and the element it matched, found or (cancel) removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub op: Op,
    pub result: Option<u64>,
}

impl Event {
    pub fn class(&self) -> Class {
        match self.op {
            Op::Post { want, .. } | Op::Probe { want, .. } => want.class,
            Op::Arrive { env, .. } => env.class,
            Op::Cancel { .. } => Class::PointToPoint,
        }
    }
}

/// What a trace is of.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Header {
    /// The rank in `MPI_COMM_WORLD`.
    pub rank: usize,
    /// The communicator, numbered on this rank in the order the shim first used it (0 is
    /// `MPI_COMM_WORLD`, 1 `MPI_COMM_SELF`).
    pub comm: usize,
    /// Processes in the communicator (what the engines' queue budget is computed from).
    pub comm_size: usize,
    /// Processes in the run.
    pub world_size: usize,
    /// Who wrote the trace: the shim (with its version and engine) or a generator.
    pub origin: String,
}

/// One communicator's events on one rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub header: Header,
    pub events: Vec<Event>,
}

const OP_POST: u8 = 0;
const OP_ARRIVE: u8 = 1;
const OP_PROBE: u8 = 2;
const OP_PROBE_REMOVE: u8 = 3;
const OP_CANCEL: u8 = 4;
/// Set in the op byte when the call matched, found or removed an element.
const HAS_RESULT: u8 = 0x80;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_signed(out: &mut Vec<u8>, v: i32) {
    put_varint(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

/// Class as one varint: 0 point-to-point, else 1 + kind·16 + size class.
fn class_code(class: Class) -> u64 {
    match class {
        Class::PointToPoint => 0,
        Class::Collective { kind, size_class } => 1 + kind as u64 * 16 + size_class as u64,
    }
}

fn class_of(code: u64) -> Result<Class, String> {
    match code {
        0 => Ok(Class::PointToPoint),
        c if c <= 1 + 255 * 16 + 15 => Ok(Class::Collective {
            kind: ((c - 1) / 16) as u8,
            size_class: ((c - 1) % 16) as u8,
        }),
        c => Err(format!("class code {c} out of range")),
    }
}

impl Trace {
    /// The trace as file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let header = serde_json::to_vec(&self.header).expect("a header always serializes");
        let mut out = Vec::with_capacity(16 + header.len() + self.events.len() * 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        for event in &self.events {
            let flag = if event.result.is_some() {
                HAS_RESULT
            } else {
                0
            };
            let pattern = |out: &mut Vec<u8>, op: u8, p: &Pattern| {
                out.push(op | flag);
                put_signed(out, p.source);
                put_signed(out, p.tag);
                put_varint(out, class_code(p.class));
            };
            match event.op {
                Op::Post { want, recv } => {
                    pattern(&mut out, OP_POST, &want);
                    put_varint(&mut out, recv);
                }
                Op::Arrive { env, msg } => {
                    out.push(OP_ARRIVE | flag);
                    put_signed(&mut out, env.source);
                    put_signed(&mut out, env.tag);
                    put_varint(&mut out, class_code(env.class));
                    put_varint(&mut out, msg);
                }
                Op::Probe { want, remove } => {
                    let op = if remove { OP_PROBE_REMOVE } else { OP_PROBE };
                    pattern(&mut out, op, &want);
                }
                Op::Cancel { recv } => {
                    out.push(OP_CANCEL | flag);
                    put_varint(&mut out, recv);
                }
            }
            if let Some(result) = event.result {
                put_varint(&mut out, result);
            }
        }
        out
    }

    /// Reads file bytes; `origin` names the file in errors.
    pub fn decode(bytes: &[u8], origin: &Path) -> Result<Trace, String> {
        let fail = |what: String| format!("{}: {what}", origin.display());
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err(fail("not a matchshim trace".into()));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(fail(format!(
                "trace format version {version}, but this matchshim reads version \
                 {FORMAT_VERSION}; record or generate it again with this version"
            )));
        }
        let len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        let body = bytes
            .get(16..16 + len)
            .ok_or_else(|| fail("header cut short".into()))?;
        let header: Header =
            serde_json::from_slice(body).map_err(|e| fail(format!("bad header ({e})")))?;
        let mut reader = Reader {
            bytes: &bytes[16 + len..],
            at: 0,
        };
        let mut events = Vec::new();
        while !reader.done() {
            let start = 16 + len + reader.at;
            let event = reader
                .event()
                .map_err(|e| fail(format!("event {} at byte {start}: {e}", events.len())))?;
            events.push(event);
        }
        Ok(Trace { header, events })
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        std::fs::write(path, self.encode())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub fn read(path: &Path) -> Result<Trace, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Trace::decode(&bytes, path)
    }

    /// The file name this trace gets in a trace directory.
    pub fn file_name(&self) -> String {
        format!("rank{}-comm{}.trace", self.header.rank, self.header.comm)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or("cut short")?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("integer longer than 64 bits".into())
    }

    fn signed(&mut self) -> Result<i32, String> {
        let v = self.varint()?;
        let v = u32::try_from(v).map_err(|_| "source or tag out of range")?;
        Ok((v >> 1) as i32 ^ -((v & 1) as i32))
    }

    fn pattern(&mut self) -> Result<Pattern, String> {
        Ok(Pattern {
            source: self.signed()?,
            tag: self.signed()?,
            class: class_of(self.varint()?)?,
        })
    }

    fn event(&mut self) -> Result<Event, String> {
        let first = self.byte()?;
        let op = match first & !HAS_RESULT {
            OP_POST => Op::Post {
                want: self.pattern()?,
                recv: self.varint()?,
            },
            OP_ARRIVE => {
                let p = self.pattern()?;
                Op::Arrive {
                    env: Envelope {
                        source: p.source,
                        tag: p.tag,
                        class: p.class,
                    },
                    msg: self.varint()?,
                }
            }
            OP_PROBE | OP_PROBE_REMOVE => Op::Probe {
                want: self.pattern()?,
                remove: first & !HAS_RESULT == OP_PROBE_REMOVE,
            },
            OP_CANCEL => Op::Cancel {
                recv: self.varint()?,
            },
            other => return Err(format!("unknown op {other}")),
        };
        let result = if first & HAS_RESULT != 0 {
            Some(self.varint()?)
        } else {
            None
        };
        Ok(Event { op, result })
    }
}

/// Every trace in `dir` (files ending in `.trace`), sorted by rank and communicator.
pub fn read_dir(dir: &Path) -> Result<Vec<Trace>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "trace"))
        .collect();
    if paths.is_empty() {
        return Err(format!(
            "{} holds no traces (rank<R>-comm<C>.trace files)",
            dir.display()
        ));
    }
    paths.sort();
    let mut traces = paths
        .iter()
        .map(|p| Trace::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    traces.sort_by_key(|t| (t.header.rank, t.header.comm));
    Ok(traces)
}

/// Writes `traces` into `dir` (created if missing), one file each.
pub fn write_dir(dir: &Path, traces: &[Trace]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    traces
        .iter()
        .try_for_each(|t| t.write(&dir.join(t.file_name())))
}

#[cfg(test)]
mod tests;
