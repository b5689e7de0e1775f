//! `serve --ublk`: the export as a Linux ublk device, /dev/ublkbN, through libublk (the
//! kernel's ublk_drv, io_uring underneath). Owns the ublk control device (add, start, stop,
//! delete, user recovery) and the queue threads, whose requests go straight to the engine:
//! READ, WRITE (FUA: flush after), FLUSH, DISCARD (trim) and WRITE_ZEROES (nbd.rs's
//! write_zeroes, holes unless NOUNMAP). Devices are created with UBLK_F_USER_RECOVERY and
//! UBLK_F_USER_RECOVERY_REISSUE: when the daemon dies the kernel keeps /dev/ublkbN and queues
//! its I/O, and `serve --ublk --ublk-id N` started again takes the device over
//! (START_USER_RECOVERY ... END_USER_RECOVERY), re-running what was in flight.
//! Each queue's thread runs its requests one after another (libublk's synchronous handler):
//! concurrency comes from --queues, not from --queue-depth.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use libublk::ctrl::{UblkCtrl, UblkCtrlBuilder};
use libublk::io::{UblkDev, UblkQueue};
use libublk::{sys, BufDesc, BufDescList, UblkFlags, UblkIORes};
use raidcore::{Error, ErrorKind, Result};

use crate::nbd::Export;

/// Largest request the device takes (the kernel splits larger ones). Every tag of every
/// queue owns a buffer of this size, locked in memory under --harden: queues x depth x 512 KiB
/// (32 MiB for one queue of the default depth 64).
pub const IO_BUF_BYTES: u32 = 512 << 10;
/// How long start-up waits for the device to come up.
const WAIT: Duration = Duration::from_secs(30);

/// What `--ublk` was asked for.
#[derive(Clone, Debug)]
pub struct UblkOptions {
    /// Device number to add, or to recover when that device is waiting for its daemon.
    pub id: Option<u32>,
    pub queues: u16,
    pub depth: u16,
}

/// A running ublk device; [`Ublk::stop`] removes it.
pub struct Ublk {
    pub id: u32,
    pub device: String,
    /// Whether this daemon took over a device a previous one left (user recovery).
    pub recovered: bool,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

fn ublk_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("ublk: {what}: {e}"))
}

/// Whether device `id` exists and waits for a daemon (quiesced after its daemon died). A
/// device of another size belongs to another array: its mounted file system must never be
/// served this one, so recovery is refused.
fn waiting_for_daemon(id: u32, size: u64) -> Result<bool> {
    if !Path::new(&format!("/dev/ublkc{id}")).exists() {
        return Ok(false);
    }
    let ctrl = UblkCtrl::new_simple(id as i32).map_err(|e| ublk_err("open control", e))?;
    let state = u32::from(ctrl.dev_info().state);
    if state == sys::UBLK_S_DEV_LIVE {
        // A live device whose daemon is gone is quiesced by the kernel within moments.
        std::thread::sleep(Duration::from_secs(1));
        let _ = ctrl.read_dev_info();
    }
    match u32::from(ctrl.dev_info().state) {
        sys::UBLK_S_DEV_QUIESCED | sys::UBLK_S_DEV_FAIL_IO => {
            let mut p = sys::ublk_params::default();
            ctrl.get_params(&mut p)
                .map_err(|e| ublk_err("GET_PARAMS", e))?;
            let theirs = p.basic.dev_sectors << 9;
            if theirs != size {
                return Err(Error::new(
                    ErrorKind::Mismatch,
                    format!(
                        "/dev/ublkb{id} waits for the daemon of another array ({theirs} bytes; this array has {size}): refusing to recover it with this one; choose another --ublk-id"
                    ),
                ));
            }
            ctrl.start_user_recover()
                .map_err(|e| ublk_err("START_USER_RECOVERY", e))?;
            Ok(true)
        }
        sys::UBLK_S_DEV_LIVE => Err(Error::new(
            ErrorKind::Busy,
            format!("/dev/ublkb{id} is live, served by another daemon"),
        )),
        _ => Err(Error::new(
            ErrorKind::Busy,
            format!(
                "/dev/ublkb{id} exists and is not waiting for recovery; choose another --ublk-id"
            ),
        )),
    }
}

/// Runs one request against the engine; the ublk result (bytes done, or -errno).
fn handle(export: &Export, iod: &sys::ublksrv_io_desc, buf: &mut [u8]) -> i32 {
    let op = iod.op_flags & 0xff;
    let flags = iod.op_flags >> 8 << 8;
    let off = iod.start_sector << 9;
    let len = (iod.nr_sectors as usize) << 9;
    let a = &export.array;
    let writes = matches!(
        op,
        sys::UBLK_IO_OP_WRITE | sys::UBLK_IO_OP_DISCARD | sys::UBLK_IO_OP_WRITE_ZEROES
    );
    if writes && export.readonly {
        return -libc::EROFS;
    }
    if matches!(op, sys::UBLK_IO_OP_READ | sys::UBLK_IO_OP_WRITE) && len > buf.len() {
        return -libc::EINVAL;
    }
    let r = match op {
        sys::UBLK_IO_OP_READ => a.read(&mut buf[..len], off),
        sys::UBLK_IO_OP_WRITE => a.write(&buf[..len], off),
        sys::UBLK_IO_OP_FLUSH => a.flush(),
        sys::UBLK_IO_OP_DISCARD => a.trim(off, len as u64).map(|_| ()),
        sys::UBLK_IO_OP_WRITE_ZEROES => {
            crate::nbd::write_zeroes(a, off, len as u64, flags & sys::UBLK_IO_F_NOUNMAP == 0)
        }
        _ => return -libc::EOPNOTSUPP,
    };
    let r = r.and_then(|_| {
        if writes && flags & sys::UBLK_IO_F_FUA != 0 {
            a.flush_range(off, len as u64)
        } else {
            Ok(())
        }
    });
    match r {
        // Bytes done for reads and writes; 0 for the rest (a discard of 2 GiB or more would
        // not fit an i32 and read as an error).
        Ok(()) if matches!(op, sys::UBLK_IO_OP_READ | sys::UBLK_IO_OP_WRITE) => len as i32,
        Ok(()) => 0,
        Err(e) if e.kind() == ErrorKind::InvalidInput => -libc::EINVAL,
        Err(e) if e.kind() == ErrorKind::Unsupported => -libc::EOPNOTSUPP,
        Err(_) => -libc::EIO,
    }
}

/// One queue's thread: fetch, run, commit, until the device stops.
fn queue(qid: u16, dev: &UblkDev, export: &Arc<Export>) {
    let bufs = dev.alloc_queue_io_bufs();
    let q = match UblkQueue::new(qid, dev)
        .and_then(|q| q.submit_fetch_commands_unified(BufDescList::Slices(Some(&bufs))))
    {
        Ok(q) => q,
        Err(e) => {
            eprintln!("raidctl serve: ublk queue {qid}: {e}");
            return;
        }
    };
    q.wait_and_handle_io(|q, tag, _io| {
        let iod = q.get_iod(tag);
        let buf = &bufs[tag as usize];
        let res = {
            // SAFETY: the buffer of `tag` belongs to this request alone until it is committed
            // below (the kernel copies into or out of it only between FETCH and COMMIT, and
            // only this queue's thread handles the tag), and it is `buf.len()` bytes long.
            let slice = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr(), buf.len()) };
            handle(export, iod, slice)
        };
        if let Err(e) = q.complete_io_cmd_unified(
            tag,
            BufDesc::Slice(buf.as_slice()),
            Ok(UblkIORes::Result(res)),
        ) {
            eprintln!("raidctl serve: ublk queue {qid}: commit tag {tag}: {e}");
        }
    });
}

impl Ublk {
    /// Adds (or recovers) the device and starts its queues; returns once /dev/ublkbN serves.
    pub fn start(export: Arc<Export>, opts: &UblkOptions) -> Result<Ublk> {
        if !Path::new("/dev/ublk-control").exists() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "/dev/ublk-control is missing: modprobe ublk_drv (Linux 6.0 or later)",
            ));
        }
        let recovered = match opts.id {
            Some(id) => waiting_for_daemon(id, export.array.size())?,
            None => false,
        };
        let size = export.array.size();
        let chunk = export.array.layout().chunk();
        let readonly = export.readonly;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<std::result::Result<(u32, String), String>>();
        let opts2 = opts.clone();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ublk".into())
            .spawn(move || {
                // Queue threads are spawned from here and inherit the mask: SIGTERM and SIGINT
                // go to the daemon's own threads, never into an io_uring wait.
                crate::daemon::block_stop_signals();
                let ctrl = match UblkCtrlBuilder::default()
                    .name("raidctl")
                    .id(opts2.id.map_or(-1, |i| i as i32))
                    .nr_queues(opts2.queues)
                    .depth(opts2.depth)
                    .io_buf_bytes(IO_BUF_BYTES)
                    .ctrl_flags(
                        u64::from(sys::UBLK_F_USER_RECOVERY)
                            | u64::from(sys::UBLK_F_USER_RECOVERY_REISSUE),
                    )
                    .dev_flags(if recovered {
                        UblkFlags::UBLK_DEV_F_RECOVER_DEV
                    } else {
                        UblkFlags::UBLK_DEV_F_ADD_DEV
                    })
                    .build()
                {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(format!("add device: {e}")));
                        return;
                    }
                };
                let tgt_init = move |dev: &mut UblkDev| {
                    dev.set_default_params(size);
                    let p = &mut dev.tgt.params;
                    p.basic.attrs = sys::UBLK_ATTR_VOLATILE_CACHE
                        | sys::UBLK_ATTR_FUA
                        | if readonly {
                            sys::UBLK_ATTR_READ_ONLY
                        } else {
                            0
                        };
                    p.basic.io_opt_shift = chunk.trailing_zeros() as u8;
                    p.types |= sys::UBLK_PARAM_TYPE_DISCARD;
                    p.discard = sys::ublk_param_discard {
                        discard_granularity: 4096,
                        max_discard_sectors: i32::MAX as u32 >> 9,
                        max_write_zeroes_sectors: i32::MAX as u32 >> 9,
                        max_discard_segments: 1,
                        ..Default::default()
                    };
                    Ok(())
                };
                let ex = export.clone();
                let q_fn = move |qid: u16, dev: &UblkDev| queue(qid, dev, &ex);
                let tx2 = tx.clone();
                let running = move |c: &UblkCtrl| {
                    let id = c.dev_info().dev_id;
                    let _ = tx2.send(Ok((id, c.get_bdev_path())));
                    while !stop2.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    if let Err(e) = c.kill_dev() {
                        eprintln!("raidctl serve: ublk: stop device: {e}");
                    }
                };
                if let Err(e) = ctrl.run_target(tgt_init, q_fn, running) {
                    let _ = tx.send(Err(format!("start device: {e}")));
                    return;
                }
                if let Err(e) = ctrl.del_dev() {
                    eprintln!("raidctl serve: ublk: delete device: {e}");
                }
            })
            .map_err(|e| ublk_err("spawn", e))?;
        match rx.recv_timeout(WAIT) {
            Ok(Ok((id, device))) => Ok(Ublk {
                id,
                device,
                recovered,
                stop,
                thread,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(Error::new(ErrorKind::Io, format!("ublk: {e}")))
            }
            Err(_) => {
                stop.store(true, Ordering::Release);
                Err(Error::new(
                    ErrorKind::Io,
                    "ublk: the device did not come up within 30 s",
                ))
            }
        }
    }

    /// Stops the device (the kernel ends its queues) and deletes it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}
