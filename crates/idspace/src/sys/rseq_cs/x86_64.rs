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
/// must end with its single commit store. The operands `area` (the thread's area), `field`
/// (the index field's offset in it), `index`, `scratch` and `status` are common to all (the
/// fields are reached by addressing modes, so that no register holds their addresses); the
/// body may use `scratch` and `status` as scratch registers (the arming is done with the
/// first, and the second is written only once the section is over), which keeps the inlined
/// sections' register count down.
///
/// The ways out that do not commit are out of line, in `__rseq_failure`: a conditional jump
/// with a 32-bit displacement reaches them wherever the linker puts that section, and each
/// jumps back to the end label. The abort handler is outside `[start, post-commit)` as the
/// kernel requires, wherever it is.
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
            "lea {scratch}, [rip + 4b]",
            "mov qword ptr [{area} + {cs_offset}], {scratch}",
            "2:",
            // Still the index the caller computed its addresses from?
            "cmp dword ptr [{area} + {field}], {index:e}",
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
            "cmp dword ptr [{guard}], {expected:e}",
            "jne 8f",
            "add qword ptr [{word}], {n}",
        ]; guard = in(reg) guard, expected = in(reg) expected, word = in(reg) word,
           n = in(reg) n,)
    };
    status
}

/// Pushes onto an array list as a section; see `Area::push`. `status` holds the length in
/// the body, `scratch` the cells' address.
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
            "mov {status:r}, qword ptr [{list}]",
            "cmp {status:r}, qword ptr [{list} + 8]",
            "jae 8f",
            "mov {scratch}, qword ptr [{list} + 16]",
            "mov qword ptr [{scratch} + {status:r} * 8], {item}",
            "add {status:r}, 1",
            "mov qword ptr [{list}], {status:r}",
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
            "mov {status:r}, qword ptr [{list}]",
            "test {status:r}, {status:r}",
            "jz 8f",
            "sub {status:r}, 1",
            "mov {scratch}, qword ptr [{list} + 16]",
            "mov {item}, qword ptr [{scratch} + {status:r} * 8]",
            "mov qword ptr [{list}], {status:r}",
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
            "cmp qword ptr [{word}], {expected}",
            "jne 8f",
            "mov qword ptr [{word}], {new}",
        ]; word = in(reg) word, expected = in(reg) expected, new = in(reg) new,)
    };
    status
}
