//! Writing a directory tree as a "newc" cpio archive, the format the kernel
//! unpacks as an initramfs. Archives written one after the other are unpacked in
//! turn, later files replacing earlier ones: the guest boots from the cached
//! base archive, a modules archive and a small payload archive concatenated.
//!
//! Owners are root and times are zero, so the same tree gives the same bytes.

use std::{
    fs::File,
    io::{BufWriter, Write},
    os::unix::fs::MetadataExt as _,
    path::Path,
};

use anyhow::Context as _;

/// Writes every file, directory and symlink under `root` (not `root` itself) to `out`.
pub fn write_tree(root: &Path, out: &Path) -> anyhow::Result<()> {
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut writer = Writer {
        out: BufWriter::new(file),
        ino: 1,
    };
    add_dir(&mut writer, root, "")?;
    writer.entry("TRAILER!!!", 0, 0, &mut std::io::empty(), 1)?;
    writer.out.flush()?;
    Ok(())
}

struct Writer {
    out: BufWriter<File>,
    ino: u32,
}

impl Writer {
    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        size: u64,
        data: &mut dyn std::io::Read,
        nlink: u32,
    ) -> anyhow::Result<()> {
        let size32 = u32::try_from(size).context("newc cpio cannot hold files over 4 GiB")?;
        let name_size = name.len() + 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino, mode, 0, 0, nlink, 0, size32, 0, 0, 0, 0, name_size, 0
        );
        self.ino += 1;
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        pad(&mut self.out, header.len() + name_size)?;
        let copied = std::io::copy(data, &mut self.out)?;
        anyhow::ensure!(copied == size, "{name} changed size while being archived");
        pad(&mut self.out, size as usize)?;
        Ok(())
    }
}

fn pad(out: &mut impl Write, len: usize) -> std::io::Result<()> {
    out.write_all(&[0u8; 3][..(4 - len % 4) % 4])
}

fn add_dir(writer: &mut Writer, dir: &Path, prefix: &str) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        let meta = std::fs::symlink_metadata(&path)?;
        let mode = meta.mode();
        if meta.is_dir() {
            writer.entry(&name, mode, 0, &mut std::io::empty(), 2)?;
            add_dir(writer, &path, &format!("{name}/"))?;
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)?;
            let target = target.as_os_str().as_encoded_bytes();
            writer.entry(&name, mode, target.len() as u64, &mut &target[..], 1)?;
        } else if meta.is_file() {
            let mut file =
                File::open(&path).with_context(|| format!("reading {}", path.display()))?;
            writer.entry(&name, mode, meta.len(), &mut file, 1)?;
        } else {
            anyhow::bail!(
                "{} is neither a file, a directory nor a symlink",
                path.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_has_headers_names_and_trailer() {
        let dir = std::env::temp_dir().join(format!("xtask-cpio-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tree/bin")).unwrap();
        std::fs::write(dir.join("tree/bin/hello"), b"hello").unwrap();
        std::os::unix::fs::symlink("hello", dir.join("tree/bin/hi")).unwrap();
        write_tree(&dir.join("tree"), &dir.join("out.cpio")).unwrap();
        let bytes = std::fs::read(dir.join("out.cpio")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("070701"));
        for needle in ["bin\0", "bin/hello\0", "hello", "bin/hi\0", "TRAILER!!!\0"] {
            assert!(text.contains(needle), "{needle:?} missing");
        }
        // "bin" is a directory entry (mode 040xxx), written before its files.
        assert_eq!(&text[14..22], "000041ed");
    }
}
