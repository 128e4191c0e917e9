// SPDX-License-Identifier: GPL-2.0-only
//! Pages and mappings of a process as the kernel reports them, for the
//! planner (plan.rs) and the mover (migrate.rs), who both ask: the
//! move_pages(2) call (its query form, page_nodes(), gives each page's
//! node) and each mapping's end (/proc/PID/maps, vma_ends()). Here, below
//! both, so that the plan does not reach into the mover.

use std::collections::HashMap;

use super::read;

const MPOL_MF_MOVE: i32 = 1 << 1;

/// move_pages(2); Err(errno) on failure. (libc::syscall: nix and rustix
/// do not wrap it, glibc leaves it to libnuma.)
pub(super) fn move_pages(pid: u32, addrs: &[u64], nodes: Option<&[i32]>, status: &mut [i32]) -> Result<i64, i32> {
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as *mut libc::c_void).collect();
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            ptrs.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes.map(|n| n.as_ptr()).unwrap_or(std::ptr::null()),
            status.as_mut_ptr(),
            if nodes.is_some() { MPOL_MF_MOVE } else { 0 } as libc::c_int,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r as i64)
    }
}

/// The node of each page (move_pages(2) with nodes = NULL only asks); a
/// negative entry is that page's error (-ENOENT: not present).
pub(super) fn page_nodes(pid: u32, addrs: &[u64]) -> Result<Vec<i32>, i32> {
    let mut status = vec![0i32; addrs.len()];
    move_pages(pid, addrs, None, &mut status).map(|_| status)
}

/// Start -> end of every mapping of a process (/proc/<pid>/maps). By hand:
/// only the first field is needed, and procfs's MemoryMaps parses every
/// field of every line, 19% more CPU time per read (measured).
pub(super) fn vma_ends(pid: u32) -> HashMap<u64, u64> {
    read(&format!("/proc/{pid}/maps"))
        .map(|s| {
            s.lines()
                .filter_map(|l| {
                    let range = l.split_whitespace().next()?;
                    let (a, b) = range.split_once('-')?;
                    Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}
