//! Opening and writing files a user or a server controls (SPEC §12): readers open regular files
//! only and read a bounded number of bytes; writers never follow a symlink they find in their
//! output and replace a file through a temporary one renamed into place.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// What a path is when it is not a regular file, in the words an error message uses: "is a
/// FIFO", "is a device"… `None` for a regular file.
pub fn not_regular(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("is a folder")
    } else if ft.is_symlink() {
        Some("is a symlink")
    } else if ft.is_fifo() {
        Some("is a FIFO")
    } else if ft.is_char_device() || ft.is_block_device() {
        Some("is a device")
    } else if ft.is_socket() {
        Some("is a socket")
    } else {
        Some("is not a regular file")
    }
}

/// What `path` is when it can be neither read as a file nor listed as a folder (after following
/// symlinks), in [`not_regular`]'s words: "is a FIFO", "is a device", "is a socket", "is a
/// symlink loop", "is a symlink to nothing". `None` for a regular file, a folder, or nothing at
/// all (which a caller names as "no such file"). For a caller that says which inputs it takes
/// before it opens one; [`open_regular`] still refuses whatever it finds when it opens.
pub fn not_file_or_folder(path: &Path) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => None,
        Ok(m) => not_regular(&m.file_type()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Some("is a symlink loop"),
        Err(_) if std::fs::symlink_metadata(path).is_ok() => Some("is a symlink to nothing"),
        Err(_) => None,
    }
}

/// Opens `path` for reading when it is a regular file (after following symlinks); anything else
/// is an error that says what it is ("is a FIFO", "is a device", "is a symlink loop"), never a
/// hang: the file is opened without blocking, so a FIFO with no writer does not wait for one.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_shown(path, &path.display().to_string())
}

/// [`open_regular`], its errors naming the file as `shown` (a file name where the folder is
/// said elsewhere). Errors other than the file's kind are the system's, unchanged.
pub fn open_shown(path: &Path, shown: &str) -> io::Result<File> {
    open_with(path, shown, 0)
}

/// Opens a file callcheck reads as its own input (a transcript under `runs/`, a task in a task
/// folder, its cache, a site it wrote) when it is a regular file *at* `path`: a symlink there is
/// refused, never followed (SPEC §12, turn 5). A committed `runs/` is input from whoever can open
/// a pull request, and a link in it could point at `/proc/self/environ` or a key file, which
/// the build would then publish. The folders above `path` are the caller's to check (the scan
/// lists them without following links). Otherwise as [`open_shown`].
pub fn open_own(path: &Path, shown: &str) -> io::Result<File> {
    open_with(path, shown, libc::O_NOFOLLOW)
}

/// Whether the regular file at `path` (not a link) starts with `head`.
pub fn starts_with(path: &Path, head: &[u8]) -> bool {
    let mut first = vec![0u8; head.len()];
    open_own(path, "")
        .and_then(|mut f| f.read_exact(&mut first))
        .is_ok_and(|()| first == head)
}

/// [`read_bounded`] through [`open_own`]: a symlink at `path` is an error that says so.
pub fn read_own(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_own(path, &path.display().to_string())?;
    read_opened(f, path, max)
}

fn open_with(path: &Path, shown: &str, flags: libc::c_int) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | flags)
        .open(path)
        .map_err(|e| describe_open_error(path, shown, e))?;
    let ft = f.metadata()?.file_type();
    if let Some(what) = not_regular(&ft) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{shown} {what}, not a regular file"),
        ));
    }
    // O_NONBLOCK means nothing to a regular file's reads; it is cleared all the same so the
    // handle behaves as any other.
    // SAFETY: fcntl on a descriptor this function owns, with flags read from it.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = f.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(f)
}

/// What a refused symlink is called in an error, after the file's name.
pub const IS_SYMLINK: &str = "is a symlink: callcheck reads no input through a link (it could point at any file of this machine); put the file itself in its place";

/// The error of an `open` said in the path's terms: a symlink cycle reads "is a symlink loop",
/// not the system's "too many levels of symbolic links"; a link refused by `O_NOFOLLOW` reads
/// [`IS_SYMLINK`].
fn describe_open_error(path: &Path, shown: &str, e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP)
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
                && std::fs::metadata(path)
                    .err()
                    .is_none_or(|e| e.raw_os_error() != Some(libc::ELOOP)) =>
        {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{shown} {IS_SYMLINK}"))
        }
        Some(libc::ELOOP) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{shown} is a symlink loop"),
        ),
        Some(libc::ENXIO) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{shown} is a socket or a device with nothing behind it"),
        ),
        _ => e,
    }
}

/// Reads a whole regular file of at most `max` bytes; a larger one, or anything that is not a
/// regular file, is an error that says so. At most `max + 1` bytes are ever read, whatever the
/// file claims its size is.
pub fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    read_opened(f, path, max)
}

fn read_opened(f: File, path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let size = f.metadata()?.len();
    if size > max {
        return Err(io::Error::other(format!(
            "{} is {} bytes, more than the {} callcheck reads of one such file",
            path.display(),
            size,
            limit(max)
        )));
    }
    match read_capped(f, max, size as usize + 1)? {
        Some(bytes) => Ok(bytes),
        None => Err(io::Error::other(format!(
            "{} grew past {} while it was read",
            path.display(),
            limit(max)
        ))),
    }
}

/// `max` bytes as a person reads them: "64 MiB", "4 KiB".
fn limit(max: u64) -> String {
    if max >= 1 << 20 {
        format!("{} MiB", max >> 20)
    } else {
        format!("{} KiB", (max >> 10).max(1))
    }
}

/// Reads `r` to its end, or `None` when it holds more than `max` bytes (at most `max + 1` are
/// ever read). `capacity` is what to reserve first.
pub fn read_capped(r: impl Read, max: u64, capacity: usize) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::with_capacity(capacity.min(max as usize + 1));
    r.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// A folder opened once (never through a link), whose entries are looked at by paths relative
/// to it: each look walks a short path instead of the whole one from the root. An incremental
/// build looks at four entries of every sample of `runs/` (400,000 for 100,000 samples), and on
/// this kind of machine a look at a relative path cost 15-20 % less system time than one at the
/// full path.
pub struct DirAt {
    fd: std::os::fd::OwnedFd,
}

/// What [`DirAt::lstat`] says of an entry: its kind, and its stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryStat {
    pub is_dir: bool,
    pub is_file: bool,
    pub stat: FileStat,
}

/// A file's size, modification and change times and inode, as `stat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct FileStat {
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: i64,
    /// The change time: set by the kernel whenever the file (or a folder's listing) changes,
    /// never by a program (`touch`, `rsync -a` and `tar -x` set the modification time only).
    pub ctime: i64,
    pub ctime_nsec: i64,
    pub ino: u64,
}

impl DirAt {
    /// Opens the folder at `path`; a symlink there is an error, not followed.
    pub fn open(path: &Path) -> io::Result<DirAt> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        Ok(DirAt { fd: f.into() })
    }

    /// `lstat` of `rel`, a path relative to the folder (a link at its end is looked at, not
    /// followed).
    pub fn lstat(&self, rel: &str) -> io::Result<EntryStat> {
        use std::os::fd::AsRawFd;
        let c = std::ffi::CString::new(rel).map_err(io::Error::other)?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a descriptor this handle owns, a NUL-terminated path, and a buffer of the
        // size fstatat writes; it is read only when the call succeeded.
        let st = unsafe {
            if libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            st.assume_init()
        };
        let kind = st.st_mode & libc::S_IFMT;
        Ok(EntryStat {
            is_dir: kind == libc::S_IFDIR,
            is_file: kind == libc::S_IFREG,
            stat: FileStat {
                size: st.st_size as u64,
                mtime: st.st_mtime,
                mtime_nsec: st.st_mtime_nsec,
                ctime: st.st_ctime,
                ctime_nsec: st.st_ctime_nsec,
                ino: st.st_ino,
            },
        })
    }
}

/// A reader that fails once a line grows past its bound, so a file of one huge line is refused
/// after reading that much of it rather than held whole (a CSV parser keeps a record whole).
pub struct LineBound<R> {
    inner: R,
    max: usize,
    /// What the file should have been, for the error: "a samples.csv".
    what: &'static str,
    /// Bytes of the current line read so far.
    line: usize,
}

impl<R> LineBound<R> {
    pub fn new(inner: R, max: usize, what: &'static str) -> LineBound<R> {
        LineBound {
            inner,
            max,
            what,
            line: 0,
        }
    }
}

impl<R: Read> Read for LineBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if b == b'\n' {
                self.line = 0;
            } else {
                self.line += 1;
                if self.line > self.max {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("a line longer than {} bytes: not {}", self.max, self.what),
                    ));
                }
            }
        }
        Ok(n)
    }
}

/// Creates `root/rel` (a folder, `/`-separated, relative) one level at a time, refusing any
/// level that exists and is not a plain folder: a symlinked folder in the output would send the
/// files written into it somewhere else. `root` itself must exist.
pub fn create_dirs_within(root: &Path, rel: &Path) -> io::Result<()> {
    let mut at = root.to_path_buf();
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", rel.display()),
            ));
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is a symlink: callcheck does not write through a symlink in its output; remove it or choose another output folder",
                        at.display()
                    ),
                ));
            }
            Ok(m) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} {} where a folder is needed",
                        at.display(),
                        not_regular(&m.file_type()).unwrap_or("is a file")
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                Ok(()) => {}
                // Made meanwhile by another writer: looked at again on the next write.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", at.display()))),
            },
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", at.display()))),
        }
    }
    Ok(())
}

/// Replaces (or creates) the file at `path` with `bytes`: written to a temporary file beside it
/// (created anew, never through an existing file or symlink) and renamed over it, so a reader
/// or a crash never sees it half-written and a symlink found at `path` is replaced, not
/// followed. The folder must exist. Returns whether something was at `path` before.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    // A temporary file of the same name is the leftover of a killed writer with this process's
    // id: only a regular file is removed (a symlink there is removed, never followed).
    if let Ok(m) = std::fs::symlink_metadata(&tmp)
        && (m.file_type().is_file() || m.file_type().is_symlink())
    {
        std::fs::remove_file(&tmp)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", tmp.display())))?;
    }
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.flush()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io::Error::new(e.kind(), format!("{}: {e}", tmp.display())));
    }
    let existed = std::fs::symlink_metadata(path).is_ok();
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
    }
    Ok(existed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_and_a_symlink_loop_are_named_not_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("response.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_bounded(&fifo, 1 << 20).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("{} is a FIFO, not a regular file", fifo.display())
        );
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "/dev/zero is a device, not a regular file");
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = read_bounded(&a, 1 << 20).unwrap_err().to_string();
        assert_eq!(e, format!("{} is a symlink loop", a.display()));
        let e = read_bounded(tmp.path(), 1 << 20).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("{} is a folder, not a regular file", tmp.path().display())
        );
        // Named the same way before opening, by a caller that takes a file or a folder.
        let nowhere = tmp.path().join("nowhere");
        let dangling = tmp.path().join("dangling");
        std::os::unix::fs::symlink(&nowhere, &dangling).unwrap();
        let plain = tmp.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        let seen: Vec<Option<&str>> = [
            fifo.as_path(),
            Path::new("/dev/zero"),
            &a,
            &dangling,
            &plain,
            tmp.path(),
            &nowhere,
        ]
        .iter()
        .map(|p| not_file_or_folder(p))
        .collect();
        assert_eq!(
            seen,
            [
                Some("is a FIFO"),
                Some("is a device"),
                Some("is a symlink loop"),
                Some("is a symlink to nothing"),
                None,
                None,
                None
            ]
        );
    }

    #[test]
    fn an_own_input_is_never_read_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("environ");
        std::fs::write(&target, b"KEY=secret").unwrap();
        let link = tmp.path().join("response.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // Followed where the user named the file, refused where callcheck found it.
        assert_eq!(read_bounded(&link, 1 << 10).unwrap(), b"KEY=secret");
        let e = read_own(&link, 1 << 10).unwrap_err().to_string();
        assert_eq!(e, format!("{} {IS_SYMLINK}", link.display()));
        // A link to a loop is named as the loop it is; a plain file is read.
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = read_own(&a, 1 << 10).unwrap_err().to_string();
        assert_eq!(e, format!("{} is a symlink loop", a.display()));
        assert_eq!(read_own(&target, 1 << 10).unwrap(), b"KEY=secret");
    }

    #[test]
    fn a_file_over_the_bound_is_refused_and_one_at_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("x.json");
        std::fs::write(&p, vec![b'x'; 4096]).unwrap();
        assert_eq!(read_bounded(&p, 4096).unwrap().len(), 4096);
        let e = read_bounded(&p, 4095).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{} is 4096 bytes, more than the 3 KiB callcheck reads of one such file",
                p.display()
            )
        );
        assert_eq!(read_capped(&b"abc"[..], 2, 0).unwrap(), None);
        assert_eq!(read_capped(&b"ab"[..], 2, 0).unwrap(), Some(b"ab".to_vec()));
    }

    #[test]
    fn writes_replace_a_symlink_and_refuse_a_symlinked_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), "mine").unwrap();
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        // A symlinked file in the output is replaced by a file; its target is untouched.
        std::os::unix::fs::symlink(outside.join("keep.txt"), out.join("a.json")).unwrap();
        assert!(replace_file(&out.join("a.json"), b"new").unwrap());
        assert_eq!(std::fs::read(out.join("a.json")).unwrap(), b"new");
        assert!(
            !std::fs::symlink_metadata(out.join("a.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(outside.join("keep.txt")).unwrap(), b"mine");
        assert!(!replace_file(&out.join("b.json"), b"b").unwrap());
        // A symlinked folder is refused with its path.
        std::os::unix::fs::symlink(&outside, out.join("linked")).unwrap();
        let e = create_dirs_within(&out, Path::new("linked/deeper"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("{} is a symlink:", out.join("linked").display())),
            "{e}"
        );
        assert!(!outside.join("deeper").exists());
        create_dirs_within(&out, Path::new("x/y")).unwrap();
        assert!(out.join("x/y").is_dir());
    }
}
