//! A pipe between threads of the lab, through `pipe2`, `read` and `write`.

/// One pipe; both ends close on drop.
pub(crate) struct OsPipe {
    read: libc::c_int,
    write: libc::c_int,
}

impl OsPipe {
    pub(crate) fn new() -> Result<OsPipe, String> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
        }
        Ok(OsPipe {
            read: fds[0],
            write: fds[1],
        })
    }

    /// Writes all of `bytes` (a pipe write of at most PIPE_BUF bytes is atomic).
    pub(crate) fn send(&self, bytes: &[u8]) -> Result<(), String> {
        let mut done = 0;
        while done < bytes.len() {
            let rest = &bytes[done..];
            // SAFETY: `rest` is a live buffer of `rest.len()` bytes; the fd is ours and open.
            let n = unsafe { libc::write(self.write, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("write: {error}"));
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Reads exactly `buffer.len()` bytes, blocking until they arrive.
    pub(crate) fn receive(&self, buffer: &mut [u8]) -> Result<(), String> {
        let mut done = 0;
        while done < buffer.len() {
            let rest = &mut buffer[done..];
            // SAFETY: `rest` is a live, writable buffer of `rest.len()` bytes; the fd is open.
            let n = unsafe { libc::read(self.read, rest.as_mut_ptr().cast(), rest.len()) };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("read: {error}"));
            }
            if n == 0 {
                return Err("read: unexpected end of pipe".into());
            }
            done += n as usize;
        }
        Ok(())
    }
}

impl Drop for OsPipe {
    fn drop(&mut self) {
        // SAFETY: both fds were opened by `new` and are closed exactly once, here.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}
