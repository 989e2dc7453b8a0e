//! A radix tree of 64-slot nodes over integer indices: the shape of the kernel's xarray
//! (`XA_CHUNK_SHIFT = 6`), reduced to what an ID allocator needs
//! (an owner's entries in `table::Radix`, a namespace's PIDs in the `pid` IDR designs).
//!
//! * The tree is as tall as its largest index needs (`64^height > index`): it grows a new root
//!   above the old one and shrinks back when only the leftmost child remains, like
//!   `xas_expand`/`xas_shrink`. Empty nodes are freed at once.
//! * Each branch keeps a `present` bitmap of children and a `full` bitmap of children with no
//!   free slot (the xarray's `XA_FREE_MARK`, inverted), so finding the first free index at or
//!   after a cursor skips full subtrees instead of visiting them.
//! * Leaves hold values inline (the xarray's slots hold pointers; with a pointer-sized value the
//!   node sizes match: 64 × 8 bytes plus bookkeeping).

use crate::prelude::*;

const SHIFT: u32 = 6;
const SLOTS: usize = 1 << SHIFT;
const ALL: u64 = u64::MAX;

// Clippy sizes `Leaf<T>` for an unknown `T` as 8 bytes; both variants are 64-slot arrays, the
// same size for the pointer-sized values the tree is meant for, and boxing a variant would
// add a pointer chase to every level of every lookup.
#[allow(clippy::large_enum_variant)]
enum Node<T> {
    Branch(Branch<T>),
    Leaf(Leaf<T>),
}

struct Branch<T> {
    slots: [Option<Box<Node<T>>>; SLOTS],
    present: u64,
    full: u64,
}

struct Leaf<T> {
    slots: [Option<T>; SLOTS],
    present: u64,
}

impl<T> Node<T> {
    /// A node for `level` (1 = leaf).
    fn new(level: u32) -> Box<Self> {
        Box::new(if level == 1 {
            Node::Leaf(Leaf {
                slots: core::array::from_fn(|_| None),
                present: 0,
            })
        } else {
            Node::Branch(Branch {
                slots: core::array::from_fn(|_| None),
                present: 0,
                full: 0,
            })
        })
    }

    fn is_full(&self) -> bool {
        match self {
            Node::Branch(branch) => branch.full == ALL,
            Node::Leaf(leaf) => leaf.present == ALL,
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Node::Branch(branch) => branch.present == 0,
            Node::Leaf(leaf) => leaf.present == 0,
        }
    }
}

/// Indices covered by a subtree of `level` levels: `64^level`.
#[inline]
fn span(level: u32) -> u64 {
    1u64 << (SHIFT * level)
}

#[inline]
fn slot_of(index: u64, level: u32) -> usize {
    ((index >> (SHIFT * (level - 1))) & (SLOTS as u64 - 1)) as usize
}

/// A radix tree mapping `u64` indices below `2^36` to values.
pub(crate) struct RadixTree<T> {
    root: Option<Box<Node<T>>>,
    /// Levels below and including the root; 0 when empty.
    height: u32,
    len: usize,
    nodes: usize,
}

impl<T> Default for RadixTree<T> {
    fn default() -> Self {
        RadixTree {
            root: None,
            height: 0,
            len: 0,
            nodes: 0,
        }
    }
}

impl<T> RadixTree<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes held by the nodes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes * core::mem::size_of::<Node<T>>()
    }

    pub(crate) fn get(&self, index: u64) -> Option<&T> {
        let mut node = self.root.as_deref()?;
        if index >= span(self.height) {
            return None;
        }
        let mut level = self.height;
        loop {
            let slot = slot_of(index, level);
            match node {
                Node::Branch(branch) => node = branch.slots[slot].as_deref()?,
                Node::Leaf(leaf) => return leaf.slots[slot].as_ref(),
            }
            level -= 1;
        }
    }

    pub(crate) fn get_mut(&mut self, index: u64) -> Option<&mut T> {
        if index >= span(self.height) {
            return None;
        }
        let mut level = self.height;
        let mut node = self.root.as_deref_mut()?;
        loop {
            let slot = slot_of(index, level);
            match node {
                Node::Branch(branch) => node = branch.slots[slot].as_deref_mut()?,
                Node::Leaf(leaf) => return leaf.slots[slot].as_mut(),
            }
            level -= 1;
        }
    }

    /// Stores `value` at `index`; hands it back if the index is taken.
    pub(crate) fn insert(&mut self, index: u64, value: T) -> Result<(), T> {
        if self.root.is_none() {
            self.height = 1;
            while span(self.height) <= index {
                self.height += 1;
            }
            self.root = Some(Node::new(self.height));
            self.nodes += 1;
        }
        while span(self.height) <= index {
            let old = self.root.take().expect("a tree with height has a root");
            let mut root = Node::new(self.height + 1);
            if let Node::Branch(branch) = &mut *root {
                branch.present = 1;
                branch.full = u64::from(old.is_full());
                branch.slots[0] = Some(old);
            }
            self.root = Some(root);
            self.height += 1;
            self.nodes += 1;
        }
        let root = self.root.as_mut().expect("root was just ensured");
        insert_in(root, self.height, index, value, &mut self.nodes)?;
        self.len += 1;
        Ok(())
    }

    pub(crate) fn remove(&mut self, index: u64) -> Option<T> {
        if index >= span(self.height) {
            return None;
        }
        let root = self.root.as_mut()?;
        let value = remove_in(root, self.height, index, &mut self.nodes)?;
        self.len -= 1;
        self.shrink();
        Some(value)
    }

    /// Drops the root while it is empty, or while it is a branch whose only child is slot 0.
    fn shrink(&mut self) {
        while let Some(root) = self.root.as_mut() {
            if root.is_empty() {
                self.root = None;
                self.height = 0;
                self.nodes -= 1;
                return;
            }
            match &mut **root {
                Node::Branch(branch) if branch.present == 1 => {
                    self.root = branch.slots[0].take();
                    self.height -= 1;
                    self.nodes -= 1;
                }
                _ => return,
            }
        }
    }

    /// The first index in `from..=max` with no value, if any.
    pub(crate) fn first_free(&self, from: u64, max: u64) -> Option<u64> {
        if from > max {
            return None;
        }
        let found = match self.root.as_deref() {
            None => from,
            Some(_) if from >= span(self.height) => from,
            Some(root) => first_free_in(root, self.height, 0, from).unwrap_or(span(self.height)),
        };
        (found <= max).then_some(found)
    }

    /// All indices, ascending.
    pub(crate) fn indices(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len);
        if let Some(root) = self.root.as_deref() {
            collect(root, self.height, 0, &mut out);
        }
        out
    }
}

fn insert_in<T>(
    node: &mut Node<T>,
    level: u32,
    index: u64,
    value: T,
    nodes: &mut usize,
) -> Result<(), T> {
    let slot = slot_of(index, level);
    match node {
        Node::Leaf(leaf) => {
            if leaf.present & (1 << slot) != 0 {
                return Err(value);
            }
            leaf.slots[slot] = Some(value);
            leaf.present |= 1 << slot;
            Ok(())
        }
        Node::Branch(branch) => {
            let child = branch.slots[slot].get_or_insert_with(|| {
                *nodes += 1;
                Node::new(level - 1)
            });
            let inserted = insert_in(child, level - 1, index, value, nodes);
            if child.is_full() {
                branch.full |= 1 << slot;
            }
            if !child.is_empty() {
                branch.present |= 1 << slot;
            } else {
                // The insert failed into a node we just made: free it again.
                branch.slots[slot] = None;
                *nodes -= 1;
            }
            inserted
        }
    }
}

fn remove_in<T>(node: &mut Node<T>, level: u32, index: u64, nodes: &mut usize) -> Option<T> {
    let slot = slot_of(index, level);
    match node {
        Node::Leaf(leaf) => {
            let value = leaf.slots[slot].take()?;
            leaf.present &= !(1 << slot);
            Some(value)
        }
        Node::Branch(branch) => {
            let child = branch.slots[slot].as_mut()?;
            let value = remove_in(child, level - 1, index, nodes)?;
            branch.full &= !(1 << slot);
            if child.is_empty() {
                branch.slots[slot] = None;
                branch.present &= !(1 << slot);
                *nodes -= 1;
            }
            Some(value)
        }
    }
}

/// The first free index at or after `from` inside the subtree at `base`, if the subtree has one.
fn first_free_in<T>(node: &Node<T>, level: u32, base: u64, from: u64) -> Option<u64> {
    match node {
        Node::Leaf(leaf) => {
            let start = (from - base) as u32;
            let taken = leaf.present | ((1u64 << start) - 1);
            (taken != ALL).then(|| base + u64::from(taken.trailing_ones()))
        }
        Node::Branch(branch) => {
            let child_span = span(level - 1);
            let first = ((from - base) / child_span) as usize;
            for slot in first..SLOTS {
                let child_base = base + slot as u64 * child_span;
                let start = from.max(child_base);
                match branch.slots[slot].as_deref() {
                    None => return Some(start),
                    Some(_) if branch.full & (1 << slot) != 0 => continue,
                    Some(child) => {
                        if let Some(found) = first_free_in(child, level - 1, child_base, start) {
                            return Some(found);
                        }
                    }
                }
            }
            None
        }
    }
}

fn collect<T>(node: &Node<T>, level: u32, base: u64, out: &mut Vec<u64>) {
    match node {
        Node::Leaf(leaf) => {
            let mut bits = leaf.present;
            while bits != 0 {
                out.push(base + u64::from(bits.trailing_zeros()));
                bits &= bits - 1;
            }
        }
        Node::Branch(branch) => {
            let child_span = span(level - 1);
            for (slot, child) in branch.slots.iter().enumerate() {
                if let Some(child) = child {
                    collect(child, level - 1, base + slot as u64 * child_span, out);
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn grows_shrinks_and_frees_nodes() {
        let mut tree = RadixTree::default();
        for index in [0u64, 63, 64, 4095, 4096, 1 << 30] {
            tree.insert(index, index).unwrap();
        }
        assert_eq!(tree.insert(64, 0), Err(0));
        assert_eq!(tree.indices(), vec![0, 63, 64, 4095, 4096, 1 << 30]);
        assert_eq!(tree.get(4095), Some(&4095));
        assert_eq!(tree.get(4094), None);
        for index in [1u64 << 30, 4096, 4095, 64, 63] {
            assert_eq!(tree.remove(index), Some(index));
        }
        assert_eq!(tree.height, 1, "only index 0 is left: one leaf");
        assert_eq!(tree.nodes, 1);
        assert_eq!(tree.remove(0), Some(0));
        assert_eq!((tree.nodes, tree.height, tree.len()), (0, 0, 0));
    }

    #[test]
    fn first_free_skips_full_subtrees() {
        let mut tree = RadixTree::default();
        for index in 0..4096 + 10 {
            tree.insert(index, ()).unwrap();
        }
        assert_eq!(tree.first_free(0, u64::MAX), Some(4106));
        assert_eq!(tree.first_free(5000, u64::MAX), Some(5000));
        assert_eq!(tree.first_free(0, 4105), None);
        tree.remove(77);
        assert_eq!(tree.first_free(3, u64::MAX), Some(77));
        assert_eq!(tree.first_free(78, u64::MAX), Some(4106));
    }
}
