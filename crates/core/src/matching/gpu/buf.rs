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
/// it too, at `addr`. The slice is kept as a pointer and a length, so reading an element costs
/// what it costs in a Vec whatever memory holds it.
pub(super) struct Buf<T: Copy> {
    ptr: *mut T,
    len: usize,
    owner: Owner<T>,
}

enum Owner<T> {
    Host(Vec<T>),
    Pinned(Block),
}

// SAFETY: a pinned buffer is owned memory like a Vec; the device reads it only during a launch,
// which its owner waits for.
unsafe impl<T: Copy + Send> Send for Buf<T> {}

impl<T: Copy> Buf<T> {
    pub fn empty() -> Self {
        Self::host(Vec::new())
    }

    fn host(mut v: Vec<T>) -> Self {
        Buf {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            owner: Owner::Host(v),
        }
    }

    /// `len` elements set to `fill`, in `memory`; pinned memory may run out.
    pub fn new(memory: &Memory, len: usize, fill: T) -> Result<Self, String> {
        match memory {
            Memory::Host => Ok(Self::host(vec![fill; len])),
            Memory::Pinned(device) => {
                let block = device.block(Kind::Pinned, len * std::mem::size_of::<T>())?;
                let mut buf = Buf {
                    ptr: block.host_ptr.cast(),
                    len,
                    owner: Owner::Pinned(block),
                };
                // SAFETY: the block holds `len` elements, aligned for any T (blocks are at least
                // 4096-byte aligned); they are written before being read.
                unsafe { std::slice::from_raw_parts_mut(buf.ptr, len) }.fill(fill);
                buf.len = len;
                Ok(buf)
            }
        }
    }

    /// The address the device reads this array at, or where the host build reads it.
    pub fn addr(&self) -> u64 {
        match &self.owner {
            Owner::Host(v) => v.as_ptr() as u64,
            Owner::Pinned(block) => block.device_ptr,
        }
    }

    /// A buffer of `len` elements in `memory` that starts with this one's; where pinned memory
    /// runs out, the arrays move to host memory (and the engine to its CPU tier).
    pub fn resized(&self, memory: &mut Memory, len: usize, fill: T) -> Self {
        let mut grown = Buf::new(memory, len, fill).unwrap_or_else(|_| {
            *memory = Memory::Host;
            Self::host(vec![fill; len])
        });
        let kept = len.min(self.len());
        grown[..kept].copy_from_slice(&self[..kept]);
        grown
    }
}

impl<T: Copy> Deref for Buf<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized elements for the buffer's life (the Vec or the
        // block it points into is owned by the buffer and never moves its elements).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Copy> DerefMut for Buf<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
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
