// SPDX-License-Identifier: GPL-2.0-only
//! QEMU glue: while counting is on, every instruction of every translated block gets a memory callback
//! (reads and writes) that feeds the model; the marker NOP always gets an execution callback that writes a
//! snapshot of all counters with qemu_plugin_outs() (QEMU's `-d plugin -D FILE` sends it to FILE).
//! Instruction fetches are not memory callbacks in QEMU and are not modeled.
//!
//! Counting is on from a begin mark to its end mark. A change flushes QEMU's translations
//! (qemu_plugin_reset, asynchronous), so that the blocks are translated again with or without the memory
//! callbacks; while a reset is under way another cannot be asked for, so every mark (and the sync mark,
//! which memmark sends after begin and end) asks again until the translations match.
use crate::model::{mark_name, mark_tag, Config, Model, MARK_LEN};
use qemu_plugin_sys::*;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use crate::model::{MARK_BEGIN, MARK_END, MARK_SYNC};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static MODEL: OnceLock<Model> = OnceLock::new();
static START: OnceLock<Instant> = OnceLock::new();
static SEQ: AtomicU64 = AtomicU64::new(0);
static ID: AtomicU64 = AtomicU64::new(0);
/// Counting wanted (the last mark was a begin); translations made with memory callbacks; a reset under way.
static WANTED: AtomicBool = AtomicBool::new(false);
static TRANSLATED_ON: AtomicBool = AtomicBool::new(false);
static RESETTING: AtomicBool = AtomicBool::new(false);

#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

fn outs(s: &str) {
    if let Ok(c) = CString::new(s) {
        unsafe { qemu_plugin_outs(c.as_ptr()) };
    }
}

/// # Safety
/// Called by QEMU once, with its info and the plugin's arguments.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    let info = &*info;
    if !info.system_emulation {
        outs("memmodel: error: needs full-system emulation\n");
        return -1;
    }
    let vcpus = info.__bindgen_anon_1.system.smp_vcpus.max(0) as usize;
    let args: Vec<String> =
        (0..argc.max(0) as usize).map(|i| CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned()).collect();
    let cfg = match Config::parse(args.iter().map(String::as_str), vcpus) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("memmodel: error: {e}");
            outs(&format!("memmodel: error: {e}\n"));
            return -1;
        }
    };
    let model = Model::new(cfg);
    outs(&model.describe());
    let _ = START.set(Instant::now());
    let _ = MODEL.set(model);
    ID.store(id, Ordering::SeqCst);
    register(id);
    0
}

unsafe fn register(id: qemu_plugin_id_t) {
    TRANSLATED_ON.store(WANTED.load(Ordering::SeqCst), Ordering::SeqCst);
    qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate));
    qemu_plugin_register_atexit_cb(id, Some(on_exit), std::ptr::null_mut());
}

/// Called with every vCPU stopped, once QEMU has dropped our callbacks and flushed its translations.
unsafe extern "C" fn on_reset(id: qemu_plugin_id_t) {
    register(id);
    RESETTING.store(false, Ordering::SeqCst);
}

/// Ask for new translations if counting is to change and no reset is under way.
fn sync() {
    if WANTED.load(Ordering::SeqCst) != TRANSLATED_ON.load(Ordering::SeqCst)
        && !RESETTING.swap(true, Ordering::SeqCst)
    {
        unsafe { qemu_plugin_reset(ID.load(Ordering::SeqCst), Some(on_reset)) };
    }
}

unsafe extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let counting = TRANSLATED_ON.load(Ordering::Relaxed);
    for i in 0..qemu_plugin_tb_n_insns(tb) {
        let insn = qemu_plugin_tb_get_insn(tb, i);
        if counting {
            qemu_plugin_register_vcpu_mem_cb(
                insn,
                Some(on_access),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                std::ptr::null_mut(),
            );
        }
        if qemu_plugin_insn_size(insn) == MARK_LEN {
            let mut b = [0u8; MARK_LEN];
            qemu_plugin_insn_data(insn, b.as_mut_ptr() as *mut c_void, MARK_LEN);
            if let Some(tag) = mark_tag(&b) {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    Some(on_mark),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    tag as usize as *mut c_void,
                );
            }
        }
    }
}

unsafe extern "C" fn on_access(vcpu: c_uint, info: qemu_plugin_meminfo_t, vaddr: u64, _: *mut c_void) {
    let Some(m) = MODEL.get() else { return };
    let h = qemu_plugin_get_hwaddr(info, vaddr);
    if h.is_null() {
        m.counters.unmapped(vcpu as usize);
    } else if qemu_plugin_hwaddr_is_io(h) {
        m.counters.io(vcpu as usize);
    } else {
        m.access(vcpu as usize, qemu_plugin_hwaddr_phys_addr(h), vaddr, qemu_plugin_mem_is_store(info));
    }
}

fn snapshot(what: &str, vcpu: u32) {
    if let Some(m) = MODEL.get() {
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let t = START.get().map_or(0, |s| s.elapsed().as_nanos());
        outs(&m.snapshot(what, seq, vcpu, t));
    }
}

unsafe extern "C" fn on_mark(vcpu: c_uint, tag: *mut c_void) {
    let tag = tag as usize as u8;
    match tag {
        MARK_BEGIN => WANTED.store(true, Ordering::SeqCst),
        MARK_END => WANTED.store(false, Ordering::SeqCst),
        _ => {}
    }
    if tag != MARK_SYNC {
        snapshot(mark_name(tag), vcpu);
    }
    sync();
}

unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _: *mut c_void) {
    snapshot("exit", u32::MAX);
}
