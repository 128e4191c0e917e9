// SPDX-License-Identifier: GPL-2.0-only
//! The lab's memory model as a QEMU TCG plugin (`-plugin libmemmodel.so,ram_mb=..,...`): see model.rs for
//! what it counts, and lab/memmodel.py for how the lab starts it and reads what it writes.
pub mod model;

#[cfg(not(test))]
mod plugin;
