/* One call of PAP Direct over a one-sided transport: see papcoll_xport.h (struct pc_xcall)
 * for the contract and papcoll/algorithms/exchange.py for the protocol's account. */
#include <errno.h>
#include <string.h>

#include "papcoll_native.h"
#include "papcoll_xport.h"

static void event(struct pc_xcall *c, int kind, size_t peer)
{
    if (c->events && c->nevents < c->max_events) {
        c->events[2 * c->nevents] = ((int64_t)kind << 56) | (int64_t)peer;
        c->events[2 * c->nevents + 1] = pc_now_ns();
        c->nevents++;
    }
}

static int mismatch(struct pc_xcall *c, int where, size_t peer, uint64_t sig)
{
    c->failed_in = where;
    c->failed_peer = peer;
    c->failed_sig = sig;
    return -EPROTO;
}

static int notice_mismatch(struct pc_xcall *c, size_t peer, uint64_t word)
{
    c->failed_code = pc_notice_code(word);
    c->failed_len = pc_notice_len(word);
    return mismatch(c, PC_IN_NOTICE, peer, 0);
}

static int zero_copy(const struct pc_xcall *c)
{
    return c->scheme == PC_ZCOPY || c->scheme == PC_STEP;
}

/* Whether my block to peer goes into a buffer it advertised (else into its inbox). */
static int exposed(const struct pc_xcall *c, size_t peer)
{
    return zero_copy(c) || (c->scheme == PC_VAR && !c->via_inbox[peer]);
}

/* Whether my block to peer goes into its inbox, written once it is seen or while idle. */
static int via_inbox(const struct pc_xcall *c, size_t peer)
{
    return c->scheme == PC_COPY || c->scheme == PC_ORDER ||
           (c->scheme == PC_VAR && c->via_inbox[peer]);
}

/* The advert record peer last wrote for me. */
static struct pc_advert record_of(const struct pc_xcall *c, size_t peer)
{
    struct pc_advert record;
    memcpy(&record, c->advert_area + peer * PC_ADVERT_BYTES, sizeof record);
    return record;
}

static uint64_t board(const struct pc_xcall *c, int kind, uint64_t seq, size_t peer)
{
    const volatile uint64_t *word = &c->x->boards[pc_board_index(kind, seq, c->x->n, peer)];
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

static int current(const struct pc_xcall *c, int kind, uint64_t seq, size_t peer)
{
    return pc_notice_current(board(c, kind, seq, peer), seq);
}

/* Whether peer's data of this call has landed: 1, 0, or -EPROTO (another call's notice). */
static int landed(struct pc_xcall *c, size_t peer)
{
    uint64_t word = board(c, PC_DATA, c->epoch, peer);
    if (!pc_notice_current(word, c->epoch))
        return 0;
    int same = c->expected ? word == c->expected[peer] : pc_notice_code(word) == c->code;
    return same ? 1 : notice_mismatch(c, peer, word);
}

/* The advert record peer wrote for me, if it is this call's: its address (0: not yet), or
 * -EPROTO. Its ADVERT notice says the record is there, and so does its data of this call: a
 * peer's advertisement goes before its data (in one QP's order over verbs; over MPI RMA its
 * records are complete at me before any of its notices is put), and a start that leaves its
 * notice out (advertise) writes no record. */
static int advertised(struct pc_xcall *c, size_t peer, uint64_t *addr, uint64_t *bytes,
                      uint32_t *rkey)
{
    /* (a notice of another call is reported where data is taken: run_pass tells all) */
    if (!current(c, PC_ADVERT, c->adverts, peer) && landed(c, peer) != 1)
        return 0;
    struct pc_advert record = record_of(c, peer);
    if (record.sig != c->sig || record.epoch != (c->record_epoch ? c->record_epoch : c->epoch))
        return mismatch(c, PC_IN_ADVERT, peer, record.sig);
    *addr = record.addr, *bytes = record.bytes, *rkey = record.rkey;
    return 1;
}

/* A peer advertised for a zero-copy call while this copy-based one advertises nothing, and
 * its data of this call has not landed. (A peer whose data landed has finished this call and
 * may advertise for its next one already; its data notice was visible before that advert was
 * sent, so reading the advert first and the data second cannot take it for a disagreement.) */
static int advertised_ahead(struct pc_xcall *c, size_t peer)
{
    if (!current(c, PC_ADVERT, c->adverts + 1, peer))
        return 0;
    int rc = landed(c, peer);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    return mismatch(c, PC_IN_ADVERT, peer, record_of(c, peer).sig);
}

static int send_to(struct pc_xcall *c, size_t peer)
{
    int rc;
    if (exposed(c, peer)) {
        uint64_t addr, bytes;
        uint32_t rkey;
        rc = advertised(c, peer, &addr, &bytes, &rkey);
        if (rc <= 0)
            return rc;
        /* never past its buffer; in PC_VAR its region is exactly the block it expects */
        if (c->scheme == PC_VAR ? c->len[peer] != bytes : c->dst_off[peer] + c->len[peer] > bytes) {
            c->failed_len = (uint32_t)bytes;
            return mismatch(c, PC_IN_ADVERT, peer, c->sig);
        }
        rc = pc_xport_put(c->x, peer, PC_TO_EXPOSED, addr + c->dst_off[peer], rkey,
                          c->src + c->src_off[peer], c->len[peer], c->lkey, PC_DATA, c->epoch,
                          c->code, 0);
    } else {
        rc = pc_xport_put(c->x, peer, PC_TO_INBOX, c->dst_off[peer], 0,
                          c->src + c->src_off[peer], c->len[peer], c->lkey, PC_DATA, c->epoch,
                          c->code, 0);
    }
    if (rc < 0)
        return rc;
    c->unsent[peer] = 0;
    event(c, PC_SENT, peer);
    return 1;
}

/* Take peer's landed data: copy it out, or hand it on. */
static int serve(struct pc_xcall *c, size_t peer)
{
    const char *data = c->inbox ? c->inbox + c->in_off[peer] : NULL;
    if (!c->expected) {                   /* lengths vary: the data's header says whose */
        uint64_t header;
        memcpy(&header, data, 8);
        if (header != c->sig)
            return mismatch(c, PC_IN_HEADER, peer, header);
    }
    if (c->out)
        memcpy(c->out + c->out_off[peer], data, c->out_len[peer]);
    c->waiting[peer] = 0;
    event(c, PC_RECEIVED, peer);
    return c->landed ? c->landed(c->landed_arg, peer) : 0;
}

/* Whether my writes may go (the gate, when set, is open). */
static int gate_open(const struct pc_xcall *c)
{
    return !c->gate || *c->gate;
}

/* After a disagreement, a copy-based rank still writes to every peer it has not written to,
 * so that they see it too (its writes wait for nobody); then it reports. */
static int tell_all(struct pc_xcall *c, int rc)
{
    if (c->scheme == PC_COPY || c->scheme == PC_ORDER || c->scheme == PC_VAR) {
        if (gate_open(c))
            for (size_t q = 0; q < c->x->n; q++)
                if (c->unsent[q] && q != c->x->me && via_inbox(c, q))
                    send_to(c, q);
        pc_xport_flush(c->x);
    }
    return rc;
}

static int left(const uint8_t *flags, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (flags[i])
            return 1;
    return 0;
}

void pc_xcall_start(struct pc_xcall *c, uint64_t epoch, uint64_t adverts, uint64_t sig,
                    uint32_t code, int64_t block)
{
    size_t n = c->x->n, me = c->x->me;
    for (size_t q = 0; q < n; q++) {
        if (c->expected && (block >= 0 || c->expect_len))   /* the call's own array */
            ((uint64_t *)c->expected)[q] = pc_notice_word(
                epoch, code, (uint32_t)(c->expect_len ? (int64_t)c->expect_len[q] : block));
        c->unsent[q] = c->waiting[q] = q != me;
    }
    c->epoch = epoch;
    c->adverts = adverts;
    c->sig = sig;
    c->code = code;
    c->next = 1;
    c->advertised = 0;
    c->nevents = 0;
    c->failed_in = 0;
}

void pc_xcall_advert(struct pc_xcall *c, size_t record, uint64_t addr, uint64_t bytes,
                     uint32_t rkey)
{
    struct pc_advert r = {addr, bytes, rkey, 0, c->record_epoch ? c->record_epoch : c->epoch,
                          c->sig};
    memcpy((char *)c->record + record * PC_ADVERT_BYTES, &r, sizeof r);
}

void pc_xcall_advertise(struct pc_xcall *c, uint64_t first, int same, uint64_t addr,
                        uint64_t bytes, uint32_t rkey)
{
    c->record_epoch = first;
    c->notice_only = first && same && *c->records == first;
    if (!c->notice_only)
        pc_xcall_advert(c, 0, addr, bytes, rkey);
    *c->records = first;
}

int pc_xcall_arrived(struct pc_xcall *c, size_t peer)
{
    int rc = pc_xport_poll(c->x);
    if (rc < 0)
        return rc;
    return current(c, PC_DATA, c->epoch, peer) ||
           ((zero_copy(c) || c->scheme == PC_VAR) && current(c, PC_ADVERT, c->adverts, peer));
}

/* One pass of a call over its peers (the wait of pc_xcall_run): write to those it may, take
 * what has landed; when nothing moved, poll the transport (polls are not free). */
static int run_pass(void *what)
{
    struct pc_xcall *c = what;
    struct pc_xport *x = c->x;
    size_t n = x->n, me = x->me;
    int rc, progressed = 0;
    int open = gate_open(c);
    for (size_t k = 1; k < n; k++) {      /* successors first: arrivals spread the load */
        size_t q = (me + k) % n;
        if (c->scheme == PC_STEP && c->unsent[q] && q == (me + c->next) % n) {
            if ((rc = send_to(c, q)) < 0)
                return rc;
            if (rc)
                c->next++, progressed = 1;
        } else if (c->scheme != PC_STEP && exposed(c, q) && c->unsent[q]) {
            if ((rc = send_to(c, q)) < 0)
                return rc;
            progressed |= rc;
        }
        if (!c->waiting[q])
            continue;
        if ((rc = landed(c, q)) < 0)
            return tell_all(c, rc);
        if (!rc)
            continue;
        event(c, PC_SEEN, q);
        if ((c->scheme == PC_COPY || c->scheme == PC_VAR) && via_inbox(c, q) && c->unsent[q] &&
            open && (rc = send_to(c, q)) < 0)
            return rc;                    /* it has arrived: it is served first */
        if ((rc = serve(c, q)) < 0)
            return tell_all(c, rc);
        progressed = 1;
    }
    if ((c->scheme == PC_COPY || c->scheme == PC_ORDER || c->scheme == PC_VAR) && open) {
        /* Nobody new: write to a peer not seen yet (all of them, in step order, for
         * PC_ORDER: its writes never wait); when all are written, a peer still awaited
         * may be in another kind of call. */
        for (size_t k = 1; k < n; k++) {
            size_t q = (me + k) % n;
            if (!c->unsent[q] || !via_inbox(c, q))
                continue;
            if ((rc = send_to(c, q)) < 0)
                return rc;
            progressed = 1;
            if (c->scheme != PC_ORDER)
                break;
        }
        if (!progressed && c->scheme == PC_COPY)
            for (size_t q = 0; q < n; q++)
                if (c->waiting[q] && q != me && (rc = advertised_ahead(c, q)) < 0)
                    return tell_all(c, rc);
    }
    if ((rc = pc_xport_flush(x)) < 0)
        return rc;
    if (open && !left(c->unsent, n) && !left(c->waiting, n))
        return PC_DONE;
    if (progressed)
        return PC_MORE;
    return (rc = pc_xport_poll(x)) < 0 ? tell_all(c, rc) : PC_IDLE;
}

/* A call's beginning, once: one poll, so that a late process sees the notices that landed
 * before it came and writes to those peers in its first pass, then my advertisements
 * (zero-copy and PC_VAR; unsignalled: the data write follows). A zero-copy start whose peers
 * hold its record (notice_only) leaves its notice out where the peer has advertised: its data,
 * written in the first pass, says what the notice would (advertised), so a late process posts
 * one work request a peer. 0 or -errno. */
static int advertise(struct pc_xcall *c)
{
    struct pc_xport *x = c->x;
    size_t n = x->n, me = x->me;
    if (c->advertised)
        return 0;
    int rc = pc_xport_poll(x);
    for (size_t k = 1; rc >= 0 && k < n && (zero_copy(c) || c->scheme == PC_VAR); k++) {
        size_t q = (me + k) % n, own = c->scheme == PC_VAR;
        uint64_t addr, bytes;
        uint32_t rkey;
        if (own && !c->advertise[q])
            continue;
        if (c->notice_only && c->scheme == PC_ZCOPY && advertised(c, q, &addr, &bytes, &rkey) > 0)
            continue;
        rc = pc_xport_put(x, q, PC_TO_ADVERTS, me * PC_ADVERT_BYTES, 0,
                          (const char *)c->record + own * q * PC_ADVERT_BYTES,
                          c->notice_only ? 0 : PC_ADVERT_BYTES, c->record_lkey, PC_ADVERT,
                          c->adverts, c->code, 0);
    }
    c->advertised = rc >= 0;
    return rc < 0 ? rc : 0;
}

/* The engine's writes go out a list a peer: queued while it runs (x->batch), posted at the
 * end of each pass (run_pass's flush) and, whatever way it ends, before it returns. */
static int unbatch(struct pc_xport *x, int rc)
{
    int flushed = pc_xport_flush(x);
    x->batch = 0;
    return rc < 0 || flushed >= 0 ? rc : flushed;
}

int pc_xcall_step(struct pc_xcall *c)
{
    int rc, idle = c->x->kind == PC_MPI ? PC_BUSY : PC_IDLE;  /* MPI moves only in my polls */
    if (c->x->kind == PC_CLOSED)
        return -EBADF;
    c->x->batch = 1;
    rc = advertise(c);
    if ((rc = unbatch(c->x, rc < 0 ? rc : run_pass(c))) != PC_DONE)
        return rc == PC_IDLE ? idle : rc;
    rc = pc_xport_complete(c->x, 0);
    return rc == -ETIMEDOUT ? idle : rc < 0 ? rc : PC_DONE;
}

int pc_xcall_run(struct pc_xcall *c, int64_t timeout_ns)
{
    struct pc_xport *x = c->x;
    int rc;
    if (x->kind == PC_CLOSED)
        return -EBADF;
    if ((x->deadline = pc_deadline(timeout_ns)) < 0)
        return (int)x->deadline;
    x->batch = 1;
    if ((rc = advertise(c)) >= 0)
        rc = pc_wait(run_pass, c, x->deadline, 0);
    if ((rc = unbatch(x, rc)) < 0)
        return rc;
    int64_t left = x->deadline - pc_now_ns();
    rc = pc_xport_complete(x, left > 0 ? left : 0);
    return rc < 0 ? rc : 1;
}
