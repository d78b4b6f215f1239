//! Arrays of the engine: the host's queue arrays and the lists of what changed, in ordinary
//! memory or, beside a device, in pinned host memory mapped into the device's address space
//! (the sync kernel reads them in place); and the mirror's arrays, in ordinary memory for the
//! kernels' host build or in device memory. Pinned and device memory come from per-device pools
//! of power-of-two blocks that are never given back to the driver: allocating either costs
//! about a millisecond, and the queues grow and shrink with every burst.

use super::device::{Block, Device, Kind};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// Where the host's arrays go.
#[derive(Clone)]
pub(super) enum Memory {
    Host,
    Pinned(Arc<Device>),
}

/// A host array: the engine reads and writes it as a slice; in pinned memory the device reads
/// it too, at `device_ptr`.
pub(super) enum Buf<T: Copy> {
    Host(Vec<T>),
    Pinned { block: Block, len: usize },
}

// SAFETY: a pinned buffer is owned memory like a Vec; the device reads it only during a launch,
// which its owner waits for.
unsafe impl<T: Copy + Send> Send for Buf<T> {}

impl<T: Copy> Buf<T> {
    pub fn empty() -> Self {
        Buf::Host(Vec::new())
    }

    /// `len` elements set to `fill`, in `memory`; pinned memory may run out.
    pub fn new(memory: &Memory, len: usize, fill: T) -> Result<Self, String> {
        match memory {
            Memory::Host => Ok(Buf::Host(vec![fill; len])),
            Memory::Pinned(device) => {
                let block = device.block(Kind::Pinned, len * std::mem::size_of::<T>())?;
                let mut buf = Buf::Pinned { block, len };
                buf.fill(fill);
                Ok(buf)
            }
        }
    }

    /// The address the device reads this array at, or where the host build reads it.
    pub fn addr(&self) -> u64 {
        match self {
            Buf::Host(v) => v.as_ptr() as u64,
            Buf::Pinned { block, .. } => block.device_ptr,
        }
    }

    /// A buffer of `len` elements in `memory` that starts with this one's; where pinned memory
    /// runs out, the arrays move to host memory (and the engine to its CPU tier).
    pub fn resized(&self, memory: &mut Memory, len: usize, fill: T) -> Self {
        let mut grown = Buf::new(memory, len, fill).unwrap_or_else(|_| {
            *memory = Memory::Host;
            Buf::Host(vec![fill; len])
        });
        let kept = len.min(self.len());
        grown[..kept].copy_from_slice(&self[..kept]);
        grown
    }
}

impl<T: Copy> Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Buf::Host(v) => v,
            // SAFETY: the block holds `len` initialized elements for the buffer's life, aligned
            // for any T (blocks are at least 4096-byte aligned).
            Buf::Pinned { block, len } => unsafe {
                std::slice::from_raw_parts(block.host_ptr.cast(), *len)
            },
        }
    }
}

impl<T: Copy> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Buf::Host(v) => v,
            // SAFETY: as in `deref`, and `&mut self` makes the access unique.
            Buf::Pinned { block, len } => unsafe {
                std::slice::from_raw_parts_mut(block.host_ptr.cast(), *len)
            },
        }
    }
}

/// A growing list in a [`Buf`] (what changed since the last sync).
pub(super) struct List<T: Copy> {
    buf: Buf<T>,
    len: usize,
}

impl<T: Copy + Default> List<T> {
    pub fn new() -> Self {
        List {
            buf: Buf::empty(),
            len: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, memory: &mut Memory, value: T) {
        if self.len == self.buf.len() {
            let len = (2 * self.len).max(64);
            self.buf = self.buf.resized(memory, len, T::default());
        }
        self.buf[self.len] = value;
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn addr(&self) -> u64 {
        self.buf.addr()
    }
}

/// An array of the mirror: host memory for the kernels' host build, device memory beside a
/// device.
pub(super) enum Dev<T: Copy> {
    Host(Vec<T>),
    Device { block: Block, len: usize },
}

// SAFETY: device memory is owned like a Vec; only its owner's launches touch it.
unsafe impl<T: Copy + Send> Send for Dev<T> {}

impl<T: Copy> Dev<T> {
    pub fn len(&self) -> usize {
        match self {
            Dev::Host(v) => v.len(),
            Dev::Device { len, .. } => *len,
        }
    }

    pub fn addr(&self) -> u64 {
        match self {
            Dev::Host(v) => v.as_ptr() as u64,
            Dev::Device { block, .. } => block.device_ptr,
        }
    }

    /// The host build's array (tests look inside the mirror).
    #[cfg(test)]
    pub fn host(&self) -> Option<&[T]> {
        match self {
            Dev::Host(v) => Some(v),
            Dev::Device { .. } => None,
        }
    }
}
