//! Queue arrays in ordinary host memory, or in pinned host memory mapped into the device's
//! address space: the kernels read and write mapped arrays in place, so the queues the CPU
//! keeps are the device's mirror and nothing is copied before a launch.

use super::device::Device;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// Where new arrays go.
#[derive(Clone)]
pub(super) enum Memory {
    Host,
    Mapped(Arc<Device>),
}

pub(super) enum Buf<T: Copy> {
    Host(Vec<T>),
    Mapped {
        ptr: *mut T,
        len: usize,
        /// The same memory as the device addresses it.
        device_ptr: u64,
        device: Arc<Device>,
    },
}

// SAFETY: a mapped buffer is owned memory like a Vec; the device touches it only during a
// launch, which the owner waits for.
unsafe impl<T: Copy + Send> Send for Buf<T> {}

impl<T: Copy> Buf<T> {
    /// `len` elements set to `fill`, in `memory`; mapped memory may run out.
    pub fn new(memory: &Memory, len: usize, fill: T) -> Result<Self, String> {
        match memory {
            Memory::Host => Ok(Buf::Host(vec![fill; len])),
            Memory::Mapped(device) => {
                let (ptr, device_ptr) = device.alloc_mapped(len * std::mem::size_of::<T>())?;
                let ptr = ptr.cast::<T>();
                // SAFETY: the allocation holds `len` elements and is aligned for any T.
                unsafe { std::slice::from_raw_parts_mut(ptr, len) }.fill(fill);
                Ok(Buf::Mapped {
                    ptr,
                    len,
                    device_ptr,
                    device: device.clone(),
                })
            }
        }
    }

    /// The device address of a mapped buffer.
    pub fn device_ptr(&self) -> Option<u64> {
        match self {
            Buf::Host(_) => None,
            Buf::Mapped { device_ptr, .. } => Some(*device_ptr),
        }
    }

    /// A buffer of `len` elements in `memory` that starts with this one's.
    pub fn resized(&self, memory: &Memory, len: usize, fill: T) -> Result<Self, String> {
        let mut grown = Buf::new(memory, len, fill)?;
        let kept = len.min(self.len());
        grown[..kept].copy_from_slice(&self[..kept]);
        Ok(grown)
    }

    /// As `resized`, in host memory, which is always given.
    pub fn resized_on_host(&self, len: usize, fill: T) -> Self {
        let mut grown = vec![fill; len];
        let kept = len.min(self.len());
        grown[..kept].copy_from_slice(&self[..kept]);
        Buf::Host(grown)
    }
}

impl<T: Copy> Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Buf::Host(v) => v,
            // SAFETY: `ptr` holds `len` initialized elements for the buffer's life.
            Buf::Mapped { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl<T: Copy> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Buf::Host(v) => v,
            // SAFETY: as in `deref`, and `&mut self` makes the access unique.
            Buf::Mapped { ptr, len, .. } => unsafe { std::slice::from_raw_parts_mut(*ptr, *len) },
        }
    }
}

impl<T: Copy> Drop for Buf<T> {
    fn drop(&mut self) {
        if let Buf::Mapped { ptr, device, .. } = self {
            device.free_mapped(ptr.cast());
        }
    }
}
