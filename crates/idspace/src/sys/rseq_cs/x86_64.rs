//! The x86-64 sections. Each is one `asm!` block built by [`section!`]: the descriptor, the
//! arming store, the index check, the body ending in its commit store; the signature, the
//! abort handler and the other ways out sit in a section of their own (`__rseq_failure`, as
//! librseq's do), so that a committed section runs straight through, with no jump, to the
//! code after it.
//!
//! Status codes: 0 committed, 1 aborted by the kernel, 2 moved, 3 refused (see the parent).
//! Labels are numeric (the block may be inlined many times) and avoid the digits 0 and 1 only,
//! which Intel syntax would read as binary numbers: 2 start, 3 post-commit, 4 descriptor,
//! 5 abort handler, 6 moved, 8 refused, 9 end.

/// One critical section: `$body` runs between the index check and the post-commit label, and
/// must end with its single commit store. The operands `cs` (the area's `rseq_cs` field),
/// `index_field`, `index` and `status` are common to all.
///
/// The ways out that do not commit are out of line, in `__rseq_failure`: a conditional jump
/// with a 32-bit displacement reaches them wherever the linker puts that section, and each
/// jumps back to the end label. The abort handler is outside `[start, post-commit)` as the
/// kernel requires, wherever it is.
macro_rules! section {
    ($status:ident, $cs:expr, $index_field:expr, $index:expr; [$($body:literal),* $(,)?]; $($operands:tt)*) => {
        core::arch::asm!(
            // The descriptor: version 0, flags 0, start_ip, post_commit_offset, abort_ip.
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "4:",
            ".long 0, 0",
            ".quad 2f, 3f - 2f, 5f",
            ".popsection",
            // Arm: one 64-bit store of the descriptor's address into `rseq_cs`.
            "lea {cs_address}, [rip + 4b]",
            "mov qword ptr [{cs}], {cs_address}",
            "2:",
            // Still the index the caller computed its addresses from?
            "cmp dword ptr [{index_field}], {index:e}",
            "jne 6f",
            $($body,)*
            "3:",
            "xor {status:e}, {status:e}",
            "9:",
            ".pushsection __rseq_failure, \"ax\"",
            // The signature, as the operand of a trapping `ud1 edi, [rip + disp32]`, so that
            // falling into it by mistake traps rather than runs data.
            ".byte 0x0f, 0xb9, 0x3d",
            ".long 0x53053053",
            "5:",
            "mov {status:e}, 1",
            "jmp 9b",
            "6:",
            "mov {status:e}, 2",
            "jmp 9b",
            "8:",
            "mov {status:e}, 3",
            "jmp 9b",
            ".popsection",
            cs = in(reg) $cs,
            index_field = in(reg) $index_field,
            index = in(reg) $index,
            cs_address = out(reg) _,
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
/// `cs` and `index_field` point into the calling thread's registered area; `word` as
/// `Area::add` requires.
#[inline]
pub(super) unsafe fn add(
    cs: *mut u64,
    index_field: *const u32,
    index: u32,
    word: *mut u64,
    n: u64,
) -> u32 {
    let status: u32;
    // SAFETY: the section writes `rseq_cs` (ours to write) and, as its commit, the word the
    // caller vouches for; it reads only the index field and that word; no stack, no calls.
    unsafe {
        section!(status, cs, index_field, index; [
            "add qword ptr [{word}], {n}",
        ]; word = in(reg) word, n = in(reg) n,)
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
    cs: *mut u64,
    index_field: *const u32,
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
        section!(status, cs, index_field, index; [
            "cmp dword ptr [{guard}], {expected:e}",
            "jne 8f",
            "add qword ptr [{word}], {n}",
        ]; guard = in(reg) guard, expected = in(reg) expected, word = in(reg) word,
           n = in(reg) n,)
    };
    status
}

/// Pushes onto an array list as a section; see `Area::push`.
///
/// # Safety
///
/// `cs` and `index_field` point into the calling thread's registered area; the list as
/// `Area::push` requires.
#[inline]
pub(super) unsafe fn push(
    cs: *mut u64,
    index_field: *const u32,
    index: u32,
    len: *mut usize,
    items: *mut usize,
    capacity: usize,
    item: usize,
) -> u32 {
    let status: u32;
    // SAFETY: the item store goes to the cell just above the length, unused until the length
    // store commits it (an abort leaves a dead value there); the cell is inside the array
    // because the length is below the capacity; the commit is the length store.
    unsafe {
        section!(status, cs, index_field, index; [
            "mov {length}, qword ptr [{len}]",
            "cmp {length}, {capacity}",
            "jae 8f",
            "mov qword ptr [{items} + {length} * 8], {item}",
            "add {length}, 1",
            "mov qword ptr [{len}], {length}",
        ]; len = in(reg) len, items = in(reg) items, capacity = in(reg) capacity,
           item = in(reg) item, length = out(reg) _,)
    };
    status
}

/// Pops from an array list as a section; see `Area::pop`. Returns the status and the item
/// (meaningful only if committed).
///
/// # Safety
///
/// `cs` and `index_field` point into the calling thread's registered area; the list as
/// `Area::pop` requires.
#[inline]
pub(super) unsafe fn pop(
    cs: *mut u64,
    index_field: *const u32,
    index: u32,
    len: *mut usize,
    items: *const usize,
) -> (u32, usize) {
    let status: u32;
    let item: usize;
    // SAFETY: the section reads the length and the last item (inside the array, as the length
    // is positive and at most the capacity) and commits with the length store.
    unsafe {
        section!(status, cs, index_field, index; [
            "mov {length}, qword ptr [{len}]",
            "test {length}, {length}",
            "jz 8f",
            "sub {length}, 1",
            "mov {item}, qword ptr [{items} + {length} * 8]",
            "mov qword ptr [{len}], {length}",
        ]; len = in(reg) len, items = in(reg) items, length = out(reg) _, item = out(reg) item,)
    };
    (status, item)
}

/// Compare-and-store as a section; see `Area::compare_store`.
///
/// # Safety
///
/// `cs` and `index_field` point into the calling thread's registered area; `word` as
/// `Area::compare_store` requires.
#[cfg_attr(not(test), allow(dead_code))]
#[inline]
pub(super) unsafe fn compare_store(
    cs: *mut u64,
    index_field: *const u32,
    index: u32,
    word: *mut usize,
    expected: usize,
    new: usize,
) -> u32 {
    let status: u32;
    // SAFETY: the section reads the word the caller vouches for and commits with one store.
    unsafe {
        section!(status, cs, index_field, index; [
            "cmp qword ptr [{word}], {expected}",
            "jne 8f",
            "mov qword ptr [{word}], {new}",
        ]; word = in(reg) word, expected = in(reg) expected, new = in(reg) new,)
    };
    status
}
