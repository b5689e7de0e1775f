//! NBD server side: the fixed newstyle handshake (options EXPORT_NAME, ABORT, LIST, INFO, GO;
//! anything else gets ERR_UNSUP) and transmission with simple replies (READ, WRITE with FUA,
//! FLUSH, TRIM, WRITE_ZEROES, DISC). Requests are read by one thread per connection and run by
//! a few workers, so many can be in flight; replies go out as they complete (NBD allows any
//! order). Every request is validated before it touches the array: a bad one gets an error
//! reply, or the connection is closed when the stream cannot be trusted any more.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use raidcore::buf::AlignedBuf;
use raidcore::Array;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
const CLIENT_FIXED_NEWSTYLE: u32 = 1;
const CLIENT_NO_ZEROES: u32 = 2;

const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_LIST: u32 = 3;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;

const REP_ACK: u32 = 1;
const REP_SERVER: u32 = 2;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
const REP_ERR_INVALID: u32 = (1 << 31) + 3;
const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
const REP_ERR_TOO_BIG: u32 = (1 << 31) + 9;

const INFO_EXPORT: u16 = 0;
const INFO_NAME: u16 = 1;
const INFO_DESCRIPTION: u16 = 2;
const INFO_BLOCK_SIZE: u16 = 3;

const TF_HAS_FLAGS: u16 = 1 << 0;
const TF_READ_ONLY: u16 = 1 << 1;
const TF_SEND_FLUSH: u16 = 1 << 2;
const TF_SEND_FUA: u16 = 1 << 3;
const TF_SEND_TRIM: u16 = 1 << 5;
const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
const TF_CAN_MULTI_CONN: u16 = 1 << 8;

const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const CMD_TRIM: u16 = 4;
const CMD_WRITE_ZEROES: u16 = 6;

const CMD_FLAG_FUA: u16 = 1 << 0;
const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
const KNOWN_CMD_FLAGS: u16 = CMD_FLAG_FUA | CMD_FLAG_NO_HOLE;

const EPERM: u32 = 1;
const EIO: u32 = 5;
const EINVAL: u32 = 22;
const ENOSPC: u32 = 28;
/// NBD_ENOTSUP: the client stops sending what the export cannot do (a trim it cannot make).
const ENOTSUP: u32 = 95;
const ESHUTDOWN: u32 = 108;

/// Largest request payload accepted (reads and writes).
pub const MAX_REQUEST: u32 = 32 << 20;
/// Largest option payload accepted during the handshake.
const MAX_OPTION: u32 = 64 << 10;
/// Bytes of request payload a connection may hold in flight at once.
const INFLIGHT_BYTES: u64 = 64 << 20;
/// Threads per connection, each reading and running requests in turn (bench/serve.sh on
/// 2 cores: see docs/NOTES.md).
const THREADS: usize = 3;
/// Threads per connection when members are devices or files: a thread waits on the devices
/// for most of a request (a bitmap write and flush, a read-modify-write), so the requests a
/// connection has in flight at once are its threads. With three, a client at queue depth 16
/// saw three, and the write-intent bitmap's group commit shared a write among three marks at
/// most (issue 30).
const DEVICE_THREADS: usize = 16;

/// What is exported.
pub struct Export {
    pub name: String,
    pub description: String,
    pub array: Arc<Array>,
    pub readonly: bool,
    /// Set when the server stops: new requests get ESHUTDOWN.
    pub stopping: Arc<AtomicBool>,
    /// Connections past the handshake.
    pub sessions: AtomicUsize,
}

impl Export {
    /// The transmission flags of this export (the handshake sends them; `--nbd-device` gives
    /// them to the kernel with NBD_SET_FLAGS).
    pub fn flags(&self) -> u16 {
        let mut f = TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA | TF_CAN_MULTI_CONN;
        if self.readonly {
            f |= TF_READ_ONLY;
        } else {
            f |= TF_SEND_TRIM | TF_SEND_WRITE_ZEROES;
        }
        f
    }

    fn matches(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }
}

/// A byte stream a client is connected on (Unix or TCP).
pub trait Conn: Read + Write + Send + 'static {
    fn try_clone_conn(&self) -> io::Result<Box<dyn Conn>>;
    /// Ends the connection for the peer, whatever other descriptors of it remain open.
    fn close_both(&self);
}

impl Conn for std::os::unix::net::UnixStream {
    fn try_clone_conn(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn close_both(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

impl Conn for std::net::TcpStream {
    fn try_clone_conn(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn close_both(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

fn read_u16(r: &mut impl Read) -> io::Result<u16> {
    let mut b = [0u8; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_be_bytes(b))
}
fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}
fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn protocol(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn opt_reply(w: &mut impl Write, opt: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    w.write_all(&REPLY_MAGIC.to_be_bytes())?;
    w.write_all(&opt.to_be_bytes())?;
    w.write_all(&kind.to_be_bytes())?;
    w.write_all(&(data.len() as u32).to_be_bytes())?;
    w.write_all(data)?;
    w.flush()
}

/// Serves one client: handshake, then transmission until it disconnects or the server stops.
pub fn serve_client(conn: Box<dyn Conn>, export: Arc<Export>) -> io::Result<()> {
    let closer = conn.try_clone_conn()?;
    let r = serve_client_inner(conn, export);
    closer.close_both();
    r
}

/// Serves a peer that is already past the handshake, given the export's size and flags some
/// other way (the kernel's nbd driver, by ioctl): the transmission phase only.
pub fn serve_transmission(conn: Box<dyn Conn>, export: Arc<Export>) -> io::Result<()> {
    let closer = conn.try_clone_conn()?;
    let reader = BufReader::new(conn.try_clone_conn()?);
    let r = transmission(reader, BufWriter::new(conn), export);
    closer.close_both();
    r
}

fn serve_client_inner(conn: Box<dyn Conn>, export: Arc<Export>) -> io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone_conn()?);
    let mut writer = BufWriter::new(conn);
    writer.write_all(&NBDMAGIC.to_be_bytes())?;
    writer.write_all(&IHAVEOPT.to_be_bytes())?;
    writer.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())?;
    writer.flush()?;
    let client_flags = read_u32(&mut reader)?;
    if client_flags & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0 {
        return Err(protocol(format!("unknown client flags {client_flags:#x}")));
    }
    let no_zeroes = client_flags & CLIENT_NO_ZEROES != 0;
    let size = export.array.size();
    loop {
        let magic = read_u64(&mut reader)?;
        if magic != IHAVEOPT {
            return Err(protocol(format!("bad option magic {magic:#x}")));
        }
        let opt = read_u32(&mut reader)?;
        let len = read_u32(&mut reader)?;
        if len > MAX_OPTION {
            // The payload cannot be skipped cheaply and the client is misbehaving.
            let _ = opt_reply(&mut writer, opt, REP_ERR_TOO_BIG, b"option too large");
            return Err(protocol(format!("option {opt} of {len} bytes")));
        }
        let mut data = vec![0u8; len as usize];
        reader.read_exact(&mut data)?;
        match opt {
            OPT_EXPORT_NAME => {
                if !export.matches(&data) {
                    return Err(protocol("unknown export name"));
                }
                writer.write_all(&size.to_be_bytes())?;
                writer.write_all(&export.flags().to_be_bytes())?;
                if !no_zeroes {
                    writer.write_all(&[0u8; 124])?;
                }
                writer.flush()?;
                break;
            }
            OPT_ABORT => {
                let _ = opt_reply(&mut writer, opt, REP_ACK, &[]);
                return Ok(());
            }
            OPT_LIST => {
                if !data.is_empty() {
                    opt_reply(&mut writer, opt, REP_ERR_INVALID, b"LIST takes no data")?;
                    continue;
                }
                let mut d = (export.name.len() as u32).to_be_bytes().to_vec();
                d.extend_from_slice(export.name.as_bytes());
                opt_reply(&mut writer, opt, REP_SERVER, &d)?;
                opt_reply(&mut writer, opt, REP_ACK, &[])?;
            }
            OPT_INFO | OPT_GO => {
                let parsed = (|| {
                    let nl = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
                    let name = data.get(4..4 + nl)?;
                    let nreq =
                        u16::from_be_bytes(data.get(4 + nl..6 + nl)?.try_into().ok()?) as usize;
                    let reqs = data.get(6 + nl..)?;
                    (reqs.len() == nreq * 2).then(|| {
                        (
                            name.to_vec(),
                            reqs.chunks(2)
                                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                                .collect::<Vec<_>>(),
                        )
                    })
                })();
                let Some((name, reqs)) = parsed else {
                    opt_reply(
                        &mut writer,
                        opt,
                        REP_ERR_INVALID,
                        b"malformed INFO/GO request",
                    )?;
                    continue;
                };
                if !export.matches(&name) {
                    opt_reply(&mut writer, opt, REP_ERR_UNKNOWN, b"no such export")?;
                    continue;
                }
                let mut info = INFO_EXPORT.to_be_bytes().to_vec();
                info.extend_from_slice(&size.to_be_bytes());
                info.extend_from_slice(&export.flags().to_be_bytes());
                opt_reply(&mut writer, opt, REP_INFO, &info)?;
                if reqs.contains(&INFO_NAME) {
                    let mut d = INFO_NAME.to_be_bytes().to_vec();
                    d.extend_from_slice(export.name.as_bytes());
                    opt_reply(&mut writer, opt, REP_INFO, &d)?;
                }
                if reqs.contains(&INFO_DESCRIPTION) {
                    let mut d = INFO_DESCRIPTION.to_be_bytes().to_vec();
                    d.extend_from_slice(export.description.as_bytes());
                    opt_reply(&mut writer, opt, REP_INFO, &d)?;
                }
                let mut d = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
                d.extend_from_slice(&1u32.to_be_bytes());
                d.extend_from_slice(&4096u32.to_be_bytes());
                d.extend_from_slice(&MAX_REQUEST.to_be_bytes());
                opt_reply(&mut writer, opt, REP_INFO, &d)?;
                opt_reply(&mut writer, opt, REP_ACK, &[])?;
                if opt == OPT_GO {
                    break;
                }
            }
            _ => opt_reply(&mut writer, opt, REP_ERR_UNSUP, b"option not supported")?,
        }
    }
    transmission(reader, writer, export)
}

/// Recycled page-aligned buffers: a fresh multi-100-KiB buffer per request costs page faults
/// (mmap, zeroing) that showed up as half the time of a sequential read.
struct BufPool {
    free: Mutex<Vec<AlignedBuf>>,
}

impl BufPool {
    const KEEP: usize = 32;

    fn get(&self, len: usize) -> AlignedBuf {
        let mut free = self.free.lock().expect("pool lock");
        match free
            .iter()
            .position(|b| b.len() >= len && b.len() <= len.max(1 << 20) * 2)
        {
            Some(i) => free.swap_remove(i),
            None => AlignedBuf::zeroed(len.next_power_of_two().max(4096)),
        }
    }

    fn put(&self, b: AlignedBuf) {
        let mut free = self.free.lock().expect("pool lock");
        if free.len() < Self::KEEP {
            free.push(b);
        }
    }
}

/// One validated request handed to a worker.
struct Job {
    /// Payload bytes held for this request (reads and writes), returned to the budget after.
    cost: u64,
    kind: u16,
    flags: u16,
    cookie: u64,
    offset: u64,
    len: u32,
    data: Option<AlignedBuf>,
}

/// Bytes of payload in flight on a connection, bounded.
struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    fn take(&self, n: u64) {
        let mut used = self.used.lock().expect("budget lock");
        while *used > 0 && *used + n > INFLIGHT_BYTES {
            used = self.freed.wait(used).expect("budget lock");
        }
        *used += n;
    }
    fn give(&self, n: u64) {
        *self.used.lock().expect("budget lock") -= n;
        self.freed.notify_all();
    }
}

type Writer = Arc<Mutex<BufWriter<Box<dyn Conn>>>>;

fn reply(w: &Writer, cookie: u64, error: u32, data: Option<&[u8]>) -> io::Result<()> {
    let mut hdr = [0u8; 16];
    hdr[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    hdr[4..8].copy_from_slice(&error.to_be_bytes());
    hdr[8..].copy_from_slice(&cookie.to_be_bytes());
    let mut w = w.lock().expect("writer lock");
    w.flush()?;
    // Header and payload in one writev, without copying the payload into the buffer.
    let mut parts = [
        io::IoSlice::new(&hdr),
        io::IoSlice::new(data.unwrap_or(&[])),
    ];
    let mut slices = &mut parts[..];
    while !slices.is_empty() && slices.iter().any(|s| !s.is_empty()) {
        let n = w.get_mut().write_vectored(slices)?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        io::IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}

fn errno(e: &raidcore::Error) -> u32 {
    match e.kind() {
        raidcore::ErrorKind::InvalidInput => EINVAL,
        raidcore::ErrorKind::Unsupported => ENOTSUP,
        _ => EIO,
    }
}

/// Zeroes `len` bytes at `offset` (NBD WRITE_ZEROES, ublk WRITE_ZEROES). With `may_unmap`,
/// whole rows inside become holes (trim) and only the edges are written.
pub fn write_zeroes(a: &Array, offset: u64, len: u64, may_unmap: bool) -> raidcore::Result<()> {
    if may_unmap {
        a.trim(offset, len)?;
    }
    let zeros = AlignedBuf::zeroed((len as usize).min(1 << 20));
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let n = ((end - pos) as usize).min(zeros.len());
        // Skip what the trim zeroed already: reading is cheaper than writing flash.
        let mut cur = AlignedBuf::zeroed(n);
        if !may_unmap || a.read(&mut cur, pos).is_err() || cur.iter().any(|&b| b != 0) {
            a.write(&zeros[..n], pos)?;
        }
        pos += n as u64;
    }
    Ok(())
}

fn run_job(export: &Export, job: &Job, pool: &BufPool) -> Result<Option<AlignedBuf>, u32> {
    let a = &export.array;
    let fua = |r: Result<(), u32>| -> Result<Option<AlignedBuf>, u32> {
        r?;
        if job.flags & CMD_FLAG_FUA != 0 {
            // This request's own cells, on the members holding them (not a whole flush).
            a.flush_range(job.offset, job.len as u64)
                .map_err(|e| errno(&e))?;
        }
        Ok(None)
    };
    match job.kind {
        CMD_READ => {
            let mut buf = pool.get(job.len as usize);
            if let Err(e) = a.read(&mut buf[..job.len as usize], job.offset) {
                pool.put(buf);
                return Err(errno(&e));
            }
            Ok(Some(buf))
        }
        CMD_WRITE => {
            let data = &job.data.as_ref().expect("write payload")[..job.len as usize];
            fua(a.write(data, job.offset).map_err(|e| errno(&e)))
        }
        CMD_FLUSH => a.flush().map(|_| None).map_err(|e| errno(&e)),
        CMD_TRIM => fua(a
            .trim(job.offset, job.len as u64)
            .map(|_| ())
            .map_err(|e| errno(&e))),
        CMD_WRITE_ZEROES => fua(write_zeroes(
            a,
            job.offset,
            job.len as u64,
            job.flags & CMD_FLAG_NO_HOLE == 0,
        )
        .map_err(|e| errno(&e))),
        _ => Err(EINVAL),
    }
}

/// The request stream of one connection, read by whichever thread takes it next.
struct Stream {
    reader: BufReader<Box<dyn Conn>>,
    /// Set at EOF, DISC or a protocol error: no more requests are read.
    closed: bool,
    result: io::Result<()>,
}

/// Shared by a connection's threads.
struct Session {
    stream: Mutex<Stream>,
    /// Mirrors `Stream::closed` for threads standing aside, which do not take the stream.
    closed: AtomicBool,
    writer: Writer,
    export: Arc<Export>,
    budget: Budget,
    pool: BufPool,
}

impl Session {
    /// Reads requests until one is valid and handed back (invalid ones are answered here with
    /// an error); None at EOF or DISC. A protocol error that loses the stream is an Err.
    fn next_request(&self, reader: &mut BufReader<Box<dyn Conn>>) -> io::Result<Option<Job>> {
        let (export, writer, budget, pool) = (&self.export, &self.writer, &self.budget, &self.pool);
        let size = export.array.size();
        loop {
            let magic = match read_u32(reader) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e),
            };
            if magic != REQUEST_MAGIC {
                return Err(protocol(format!("bad request magic {magic:#x}")));
            }
            let flags = read_u16(reader)?;
            let kind = read_u16(reader)?;
            let cookie = read_u64(reader)?;
            let offset = read_u64(reader)?;
            let len = read_u32(reader)?;
            if kind == CMD_DISC {
                return Ok(None);
            }
            let mut data = None;
            if kind == CMD_WRITE {
                if len > MAX_REQUEST {
                    // Its payload is too large to take in: the stream cannot be resynchronised.
                    let _ = reply(writer, cookie, EINVAL, None);
                    return Err(protocol(format!(
                        "write of {len} bytes exceeds {MAX_REQUEST}"
                    )));
                }
                budget.take(len as u64);
                let mut buf = pool.get(len as usize);
                if let Err(e) = reader.read_exact(&mut buf[..len as usize]) {
                    budget.give(len as u64);
                    return Err(e);
                }
                data = Some(buf);
            }
            let cost = if matches!(kind, CMD_READ | CMD_WRITE) && len <= MAX_REQUEST {
                len as u64
            } else {
                0
            };
            if kind == CMD_READ {
                budget.take(cost);
            }
            let known = matches!(
                kind,
                CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_WRITE_ZEROES
            );
            let out_of_range =
                kind != CMD_FLUSH && offset.checked_add(len as u64).is_none_or(|e| e > size);
            let error = if flags & !KNOWN_CMD_FLAGS != 0
                || !known
                || (kind == CMD_READ && len > MAX_REQUEST)
                || (kind == CMD_FLUSH && (offset != 0 || len != 0))
            {
                Some(EINVAL)
            } else if export.readonly && matches!(kind, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES) {
                Some(EPERM)
            } else if out_of_range {
                Some(if kind == CMD_READ { EINVAL } else { ENOSPC })
            } else if export.stopping.load(Ordering::Acquire) {
                Some(ESHUTDOWN)
            } else {
                None
            };
            if let Some(e) = error {
                if let Some(b) = data {
                    pool.put(b);
                }
                budget.give(cost);
                reply(writer, cookie, e, None)?;
                continue;
            }
            return Ok(Some(Job {
                cost,
                kind,
                flags,
                cookie,
                offset,
                len,
                data,
            }));
        }
    }

    /// Whether a connection's extra threads stand aside for now. They are there to overlap
    /// device waits within one connection; with every member in memory and at least as many
    /// connections as cores, one thread per connection keeps the cores busy and the extra
    /// ones only add a hand-off (a futex wake and a sleep) per request.
    fn helpers_stand_aside(&self) -> bool {
        static CORES: OnceLock<usize> = OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        self.export.sessions.load(Ordering::Relaxed) >= cores
            && !self.export.array.waits_on_devices()
    }

    /// One of the connection's threads: take the stream, read a request, let go, run it,
    /// answer; until the stream ends. No hand-off between a reader and workers, so a request
    /// costs no thread wake-up while others keep the threads busy (as nbdkit does). A
    /// `helper` (any thread but the first) waits, polling, while [`Session::helpers_stand_aside`].
    fn serve(&self, helper: bool) {
        loop {
            while helper && self.helpers_stand_aside() {
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let mut job = {
                let mut st = self.stream.lock().unwrap_or_else(|e| e.into_inner());
                if st.closed {
                    return;
                }
                let Stream { reader, .. } = &mut *st;
                let next = self.next_request(reader);
                if !matches!(next, Ok(Some(_))) {
                    st.closed = true;
                    self.closed.store(true, Ordering::Release);
                }
                match next {
                    Ok(Some(j)) => j,
                    Ok(None) => return,
                    Err(e) => {
                        st.result = Err(e);
                        return;
                    }
                }
            };
            let out = run_job(&self.export, &job, &self.pool);
            let sent = match &out {
                Ok(Some(data)) => {
                    reply(&self.writer, job.cookie, 0, Some(&data[..job.len as usize]))
                }
                Ok(None) => reply(&self.writer, job.cookie, 0, None),
                Err(e) => reply(&self.writer, job.cookie, *e, None),
            };
            if let Ok(Some(b)) = out {
                self.pool.put(b);
            }
            if let Some(b) = job.data.take() {
                self.pool.put(b);
            }
            self.budget.give(job.cost);
            if let Err(e) = sent {
                let mut st = self.stream.lock().unwrap_or_else(|e| e.into_inner());
                st.closed = true;
                self.closed.store(true, Ordering::Release);
                if st.result.is_ok() {
                    st.result = Err(e);
                }
                return;
            }
        }
    }
}

fn transmission(
    reader: BufReader<Box<dyn Conn>>,
    writer: BufWriter<Box<dyn Conn>>,
    export: Arc<Export>,
) -> io::Result<()> {
    let session = Arc::new(Session {
        stream: Mutex::new(Stream {
            reader,
            closed: false,
            result: Ok(()),
        }),
        closed: AtomicBool::new(false),
        writer: Arc::new(Mutex::new(writer)),
        export,
        budget: Budget {
            used: Mutex::new(0),
            freed: Condvar::new(),
        },
        pool: BufPool {
            free: Mutex::new(Vec::new()),
        },
    });
    session.export.sessions.fetch_add(1, Ordering::Relaxed);
    let threads = if session.export.array.waits_on_devices() {
        DEVICE_THREADS
    } else {
        THREADS
    };
    let others: Vec<_> = (1..threads)
        .map(|_| {
            let s = session.clone();
            std::thread::spawn(move || s.serve(true))
        })
        .collect();
    session.serve(false);
    // Finish what is in flight: replies for accepted requests still go out.
    for t in others {
        let _ = t.join();
    }
    session.export.sessions.fetch_sub(1, Ordering::Relaxed);
    let mut st = session.stream.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::replace(&mut st.result, Ok(()))
}
