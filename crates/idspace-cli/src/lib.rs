//! The `idspace` command's library: the replay protocols (`idspace replay FAMILY`), so that the
//! binary and the fuzz targets (`fuzz/` at the workspace root) drive the same code. It needs
//! none of the binary's cargo features.

#![warn(missing_docs)]

pub mod replay;
