//! A minimal BTF reader: struct member offsets by name, from kernel BTF.
//!
//! zfs.ko's BTF (/sys/kernel/btf/zfs, present when the module was built with
//! pahole) is "split" BTF: its string offsets continue those of the kernel's base
//! BTF (/sys/kernel/btf/vmlinux). zprof needs only byte offsets of a few members
//! of a few structs, so this reads exactly that and nothing more.

use std::collections::HashMap;

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;

/// Struct name -> member name -> byte offset.
pub type StructOffsets = HashMap<String, HashMap<String, u32>>;

/// Errors reading BTF.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// Not BTF, or truncated.
    #[error("malformed BTF: {0}")]
    Malformed(&'static str),
    /// A kind this reader does not know, so it cannot skip it safely.
    #[error("unknown BTF kind {0}")]
    UnknownKind(u32),
}

struct Header<'a> {
    types: &'a [u8],
    strings: &'a [u8],
}

fn u32_at(data: &[u8], at: usize) -> Result<u32, BtfError> {
    data.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(BtfError::Malformed("truncated"))
}

fn parse_header(data: &[u8]) -> Result<Header<'_>, BtfError> {
    if data.len() < 24 || u16::from_le_bytes([data[0], data[1]]) != BTF_MAGIC {
        return Err(BtfError::Malformed("bad magic (big-endian BTF is not supported)"));
    }
    let hdr_len = u32_at(data, 4)? as usize;
    let type_off = u32_at(data, 8)? as usize;
    let type_len = u32_at(data, 12)? as usize;
    let str_off = u32_at(data, 16)? as usize;
    let str_len = u32_at(data, 20)? as usize;
    let types = data
        .get(hdr_len + type_off..hdr_len + type_off + type_len)
        .ok_or(BtfError::Malformed("type section out of bounds"))?;
    let strings = data
        .get(hdr_len + str_off..hdr_len + str_off + str_len)
        .ok_or(BtfError::Malformed("string section out of bounds"))?;
    Ok(Header { types, strings })
}

/// Length of the kind-specific data that follows a type's 12-byte header.
fn trailing_len(kind: u32, vlen: usize) -> Result<usize, BtfError> {
    Ok(match kind {
        1 => 4,               // INT
        2 | 7..=12 | 16 | 18 => 0, // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        3 => 12,              // ARRAY
        4 | 5 => 12 * vlen,   // STRUCT, UNION
        6 => 8 * vlen,        // ENUM
        13 => 8 * vlen,       // FUNC_PROTO
        14 => 4,              // VAR
        15 => 12 * vlen,      // DATASEC
        17 => 4,              // DECL_TAG
        19 => 12 * vlen,      // ENUM64
        other => return Err(BtfError::UnknownKind(other)),
    })
}

/// Reads member offsets of the `wanted` structs from `split` BTF (or from a base
/// BTF when `base` is `None`). `base` supplies the string table split BTF extends.
pub fn struct_offsets(
    split: &[u8],
    base: Option<&[u8]>,
    wanted: &[&str],
) -> Result<StructOffsets, BtfError> {
    let header = parse_header(split)?;
    let base_strings = match base {
        Some(base) => parse_header(base)?.strings,
        None => &[][..],
    };
    let name = |off: u32| -> String {
        let off = off as usize;
        let (table, at) = if off < base_strings.len() {
            (base_strings, off)
        } else {
            (header.strings, off - base_strings.len())
        };
        table
            .get(at..)
            .and_then(|rest| rest.split(|b| *b == 0).next())
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
            .unwrap_or_default()
    };
    let mut out = StructOffsets::new();
    let types = header.types;
    let mut at = 0;
    while at + 12 <= types.len() {
        let name_off = u32_at(types, at)?;
        let info = u32_at(types, at + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let kind_flag = info >> 31 == 1;
        let body = at + 12;
        if kind == KIND_STRUCT || kind == KIND_UNION {
            let struct_name = name(name_off);
            if wanted.contains(&struct_name.as_str()) && !out.contains_key(&struct_name) {
                let mut members = HashMap::new();
                for i in 0..vlen {
                    let m = body + i * 12;
                    let member_name = name(u32_at(types, m)?);
                    let raw = u32_at(types, m + 8)?;
                    // With kind_flag the low 24 bits are the bit offset (bitfields).
                    let bits = if kind_flag { raw & 0x00ff_ffff } else { raw };
                    if !member_name.is_empty() {
                        members.insert(member_name, bits / 8);
                    }
                }
                out.insert(struct_name, members);
            }
        }
        at = body + trailing_len(kind, vlen)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the running kernel's real BTF: task_struct's pid follows its state.
    #[test]
    fn reads_vmlinux_struct_offsets() {
        let Ok(vmlinux) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux on this machine");
            return;
        };
        let offsets = struct_offsets(&vmlinux, None, &["task_struct", "file"]).unwrap();
        let task = &offsets["task_struct"];
        assert!(task["pid"] > 0);
        assert!(task["tgid"] > task["pid"], "tgid follows pid in task_struct");
        assert!(offsets["file"].contains_key("f_op"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(struct_offsets(b"hello world, not btf at all", None, &[]), Err(BtfError::Malformed(_))));
    }
}
