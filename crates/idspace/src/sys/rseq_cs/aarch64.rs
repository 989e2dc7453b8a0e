//! The AArch64 sections, the same shapes as the x86-64 ones: the descriptor, the arming store,
//! the index check, the body ending in its commit store, then the signature and the abort
//! handler, which the normal path jumps over.
//!
//! Status codes: 0 committed, 1 aborted by the kernel, 2 moved, 3 refused (see the parent).
//! Labels: 2 start, 3 post-commit, 4 descriptor, 5 abort handler, 6 moved, 8 refused, 9 end.

/// One critical section: `$body` runs between the index check and the post-commit label, and
/// must end with its single commit store. The body may use `scratch` (free once the index is
/// checked) and `status` (written only once the section is over) as scratch registers.
macro_rules! section {
    ($status:ident, $area:expr, $field:expr, $index:expr; [$($body:literal),* $(,)?]; $($operands:tt)*) => {
        core::arch::asm!(
            // The descriptor: version 0, flags 0, start_ip, post_commit_offset, abort_ip.
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "4:",
            ".long 0, 0",
            ".quad 2f, 3f - 2f, 5f",
            ".popsection",
            // Arm: one 64-bit store of the descriptor's address into `rseq_cs`.
            "adrp {scratch}, 4b",
            "add {scratch}, {scratch}, :lo12:4b",
            "str {scratch}, [{area}, #{cs_offset}]",
            "2:",
            // Still the index the caller computed its addresses from?
            "ldr {scratch:w}, [{area}, {field}]",
            "cmp {scratch:w}, {index:w}",
            "b.ne 6f",
            $($body,)*
            "3:",
            "mov {status:w}, #0",
            "b 9f",
            // The signature, which is also the encoding of `brk #0x45e0`: falling into it by
            // mistake traps rather than runs data.
            ".inst 0xd428bc00",
            "5:",
            "mov {status:w}, #1",
            "b 9f",
            "6:",
            "mov {status:w}, #2",
            "b 9f",
            "8:",
            "mov {status:w}, #3",
            "9:",
            area = in(reg) $area,
            field = in(reg) $field,
            cs_offset = const super::RSEQ_CS_OFFSET,
            index = in(reg) $index,
            scratch = out(reg) _,
            status = out(reg) $status,
            $($operands)*
            options(nostack)
        )
    };
}

/// `*word += n` as a section; see `Area::add`.
///
/// # Safety
///
/// `area` is the calling thread's registered area and `field` an index field's offset in
/// it; `word` as `Area::add` requires.
#[inline]
pub(super) unsafe fn add(area: *mut u8, field: usize, index: u32, word: *mut u64, n: u64) -> u32 {
    let status: u32;
    // SAFETY: the section writes `rseq_cs` (ours to write) and, as its commit, the word the
    // caller vouches for; it reads only the index field and that word; no stack, no calls.
    unsafe {
        section!(status, area, field, index; [
            "ldr {value}, [{word}]",
            "add {value}, {value}, {n}",
            "str {value}, [{word}]",
        ]; word = in(reg) word, n = in(reg) n, value = out(reg) _,)
    };
    status
}

/// `*word += n` as a section that first checks `*guard == expected`; see `Area::add_if`.
///
/// # Safety
///
/// As for [`add`]; `guard` is valid and 4-byte aligned.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn add_if(
    area: *mut u8,
    field: usize,
    index: u32,
    guard: *const u32,
    expected: u32,
    word: *mut u64,
    n: u64,
) -> u32 {
    let status: u32;
    // SAFETY: as in `add`; the section also reads the guard word, and refuses (status 3)
    // without a store if it does not hold `expected`.
    unsafe {
        section!(status, area, field, index; [
            "ldr {value:w}, [{guard}]",
            "cmp {value:w}, {expected:w}",
            "b.ne 8f",
            "ldr {value}, [{word}]",
            "add {value}, {value}, {n}",
            "str {value}, [{word}]",
        ]; guard = in(reg) guard, expected = in(reg) expected, word = in(reg) word,
           n = in(reg) n, value = out(reg) _,)
    };
    status
}

/// Pushes onto an array list as a section; see `Area::push`. `status` holds the length in
/// the body, `scratch` the capacity, then the cells' address.
///
/// # Safety
///
/// `area` is the calling thread's registered area and `field` an index field's offset in
/// it; the list as `Area::push` requires.
#[inline(always)]
pub(super) unsafe fn push(
    area: *mut u8,
    field: usize,
    index: u32,
    list: *mut usize,
    item: usize,
) -> u32 {
    let status: u32;
    // SAFETY: the item store goes to the cell just above the length, unused until the length
    // store commits it (an abort leaves a dead value there); the cell is inside the array
    // because the length is below the capacity (header offsets 8 and 16, the parent's list
    // layout); the commit is the length store.
    unsafe {
        section!(status, area, field, index; [
            "ldr {status:x}, [{list}]",
            "ldr {scratch}, [{list}, #8]",
            "cmp {status:x}, {scratch}",
            "b.hs 8f",
            "ldr {scratch}, [{list}, #16]",
            "str {item}, [{scratch}, {status:x}, lsl #3]",
            "add {status:x}, {status:x}, #1",
            "str {status:x}, [{list}]",
        ]; list = in(reg) list, item = in(reg) item,)
    };
    status
}

/// Pops from an array list as a section; see `Area::pop`. Returns the status and the item
/// (meaningful only if committed). `status` holds the length in the body, `scratch` the
/// cells' address.
///
/// # Safety
///
/// `area` is the calling thread's registered area and `field` an index field's offset in
/// it; the list as `Area::pop` requires.
#[inline(always)]
pub(super) unsafe fn pop(
    area: *mut u8,
    field: usize,
    index: u32,
    list: *mut usize,
) -> (u32, usize) {
    let status: u32;
    let item: usize;
    // SAFETY: the section reads the length, the cells' address and the last item (inside the
    // array, as the length is positive and at most the capacity) and commits with the length
    // store.
    unsafe {
        section!(status, area, field, index; [
            "ldr {status:x}, [{list}]",
            "cbz {status:x}, 8f",
            "sub {status:x}, {status:x}, #1",
            "ldr {scratch}, [{list}, #16]",
            "ldr {item}, [{scratch}, {status:x}, lsl #3]",
            "str {status:x}, [{list}]",
        ]; list = in(reg) list, item = out(reg) item,)
    };
    (status, item)
}

/// Compare-and-store as a section; see `Area::compare_store`.
///
/// # Safety
///
/// `area` is the calling thread's registered area and `field` an index field's offset in
/// it; `word` as `Area::compare_store` requires.
#[cfg_attr(not(test), allow(dead_code))]
#[inline]
pub(super) unsafe fn compare_store(
    area: *mut u8,
    field: usize,
    index: u32,
    word: *mut usize,
    expected: usize,
    new: usize,
) -> u32 {
    let status: u32;
    // SAFETY: the section reads the word the caller vouches for and commits with one store.
    unsafe {
        section!(status, area, field, index; [
            "ldr {value}, [{word}]",
            "cmp {value}, {expected}",
            "b.ne 8f",
            "str {new}, [{word}]",
        ]; word = in(reg) word, expected = in(reg) expected, new = in(reg) new,
           value = out(reg) _,)
    };
    status
}
