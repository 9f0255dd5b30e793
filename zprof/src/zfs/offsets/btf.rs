//! A minimal BTF reader: struct member offsets and enumerator values by name,
//! from kernel BTF.
//!
//! zfs.ko's BTF (/sys/kernel/btf/zfs, present when the module was built with
//! pahole) is "split" BTF: its string offsets continue those of the kernel's base
//! BTF (/sys/kernel/btf/vmlinux). zprof needs only byte offsets of a few members
//! of a few structs, so this reads exactly that and nothing more.

use std::collections::HashMap;

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_ENUM64: u32 = 19;

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
        return Err(BtfError::Malformed(
            "bad magic (big-endian BTF is not supported)",
        ));
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
        1 => 4,                    // INT
        2 | 7..=12 | 16 | 18 => 0, // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        3 => 12,                   // ARRAY
        4 | 5 => 12 * vlen,        // STRUCT, UNION
        6 => 8 * vlen,             // ENUM
        13 => 8 * vlen,            // FUNC_PROTO
        14 => 4,                   // VAR
        15 => 12 * vlen,           // DATASEC
        17 => 4,                   // DECL_TAG
        19 => 12 * vlen,           // ENUM64
        other => return Err(BtfError::UnknownKind(other)),
    })
}

/// One type of a BTF type section, as the walk sees it.
struct Type<'a> {
    kind: u32,
    name: String,
    vlen: usize,
    kind_flag: bool,
    /// The kind-specific data after the 12-byte header.
    body: &'a [u8],
}

/// Calls `visit` for every type of `split` BTF (names resolved through `base`'s
/// string table, which split BTF extends).
fn walk_types(
    split: &[u8],
    base: Option<&[u8]>,
    mut visit: impl FnMut(&Type, &dyn Fn(u32) -> String) -> Result<(), BtfError>,
) -> Result<(), BtfError> {
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
    let types = header.types;
    let mut at = 0;
    while at + 12 <= types.len() {
        let info = u32_at(types, at + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let end = at + 12 + trailing_len(kind, vlen)?;
        let body = types
            .get(at + 12..end)
            .ok_or(BtfError::Malformed("type data out of bounds"))?;
        let ty = Type {
            kind,
            name: name(u32_at(types, at)?),
            vlen,
            kind_flag: info >> 31 == 1,
            body,
        };
        visit(&ty, &name)?;
        at = end;
    }
    Ok(())
}

/// Reads member offsets of the `wanted` structs from `split` BTF (or from a base
/// BTF when `base` is `None`). `base` supplies the string table split BTF extends.
pub fn struct_offsets(
    split: &[u8],
    base: Option<&[u8]>,
    wanted: &[&str],
) -> Result<StructOffsets, BtfError> {
    let mut out = StructOffsets::new();
    walk_types(split, base, |ty, name| {
        if (ty.kind == KIND_STRUCT || ty.kind == KIND_UNION)
            && wanted.contains(&ty.name.as_str())
            && !out.contains_key(&ty.name)
        {
            let mut members = HashMap::new();
            for i in 0..ty.vlen {
                let member_name = name(u32_at(ty.body, i * 12)?);
                let raw = u32_at(ty.body, i * 12 + 8)?;
                // With kind_flag the low 24 bits are the bit offset (bitfields).
                let bits = if ty.kind_flag { raw & 0x00ff_ffff } else { raw };
                if !member_name.is_empty() {
                    members.insert(member_name, bits / 8);
                }
            }
            out.insert(ty.name.clone(), members);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The value of the enumerator named `wanted` in any enum of `split` BTF, if one
/// has it (OpenZFS 2.1's `enum zio_flag`; 2.2 and later use #defines, which BTF
/// does not carry).
pub fn enumerator(
    split: &[u8],
    base: Option<&[u8]>,
    wanted: &str,
) -> Result<Option<u64>, BtfError> {
    let mut found = None;
    walk_types(split, base, |ty, name| {
        let (entry, is64) = match ty.kind {
            KIND_ENUM => (8, false),
            KIND_ENUM64 => (12, true),
            _ => return Ok(()),
        };
        for i in 0..ty.vlen {
            if found.is_none() && name(u32_at(ty.body, i * entry)?) == wanted {
                let low = u32_at(ty.body, i * entry + 4)? as u64;
                let high = if is64 {
                    u32_at(ty.body, i * entry + 8)? as u64
                } else {
                    0
                };
                found = Some(high << 32 | low);
            }
        }
        Ok(())
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel's BTF. Every kernel zprof supports (Debian's 6.1 to
    /// 6.17, and these machines') is built with CONFIG_DEBUG_INFO_BTF, so
    /// its absence fails the test instead of skipping it.
    fn running_kernel_btf() -> Vec<u8> {
        std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_else(|err| {
            panic!("cannot read /sys/kernel/btf/vmlinux ({err}): this kernel lacks CONFIG_DEBUG_INFO_BTF, which zprof needs")
        })
    }

    /// Reads the running kernel's real BTF: task_struct's pid follows its state.
    #[test]
    fn reads_vmlinux_struct_offsets() {
        let vmlinux = running_kernel_btf();
        let offsets = struct_offsets(&vmlinux, None, &["task_struct", "file"]).unwrap();
        let task = &offsets["task_struct"];
        assert!(task["pid"] > 0);
        assert!(
            task["tgid"] > task["pid"],
            "tgid follows pid in task_struct"
        );
        assert!(offsets["file"].contains_key("f_op"));
    }

    /// The running kernel's BTF has enum pid_type with PIDTYPE_TGID = 1.
    #[test]
    fn reads_vmlinux_enumerators() {
        let vmlinux = running_kernel_btf();
        assert_eq!(enumerator(&vmlinux, None, "PIDTYPE_TGID").unwrap(), Some(1));
        assert_eq!(
            enumerator(&vmlinux, None, "ZPROF_NO_SUCH_ENUMERATOR").unwrap(),
            None
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(
            struct_offsets(b"hello world, not btf at all", None, &[]),
            Err(BtfError::Malformed(_))
        ));
    }
}
