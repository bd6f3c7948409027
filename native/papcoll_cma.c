/* Cross Memory Attach: copies between this process and another that move every byte or report
 * an errno, the probe behind the CMA cost model, and the ptrace permission CMA needs
 * (contracts in papcoll_native.h). */
#define _GNU_SOURCE /* process_vm_readv/writev, IOV_MAX */
#include "papcoll_native.h"

#include <errno.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/uio.h>

/* Move every byte of the segments, IOV_MAX segments per syscall. The cursor
 * (seg, off) is the first byte not yet moved. The kernel returns a short
 * count when it stops early (a fault after some bytes, or its ~2 GiB cap per
 * call), possibly inside a segment; the next call resumes exactly there. A
 * call that moves nothing fails with an errno that belongs to the byte at the
 * cursor, which is why err_seg = seg is exact. */
static ssize_t cma_rw(pid_t pid, size_t n_segments, const uintptr_t *local_addrs,
                      const uintptr_t *remote_addrs, const size_t *lengths,
                      size_t *err_seg, int write)
{
    size_t total = 0;
    for (size_t i = 0; i < n_segments; i++) {
        if (lengths[i] > (size_t)SSIZE_MAX - total)
            return -EINVAL;
        total += lengths[i];
    }

    struct iovec liov[IOV_MAX], riov[IOV_MAX];
    size_t seg = 0, off = 0;
    for (;;) {
        unsigned long k = 0;
        for (size_t s = seg, o = off; s < n_segments && k < IOV_MAX; s++, o = 0) {
            if (lengths[s] == o)
                continue;
            liov[k] = (struct iovec){(void *)(local_addrs[s] + o), lengths[s] - o};
            riov[k] = (struct iovec){(void *)(remote_addrs[s] + o), lengths[s] - o};
            k++;
        }
        if (k == 0)
            return (ssize_t)total;
        ssize_t got = write ? process_vm_writev(pid, liov, k, riov, k, 0)
                            : process_vm_readv(pid, liov, k, riov, k, 0);
        if (got <= 0) {
            /* Moving nothing without an error cannot happen with non-empty
             * iovecs; report it rather than loop forever. */
            int err = got < 0 ? errno : EIO;
            /* Skip zero-length segments so err_seg names a real one. */
            while (lengths[seg] == off) {
                seg++;
                off = 0;
            }
            if (err_seg)
                *err_seg = seg;
            return -err;
        }
        for (size_t g = (size_t)got; g > 0;) {
            size_t left = lengths[seg] - off;
            if (g < left) {
                off += g;
                g = 0;
            } else {
                g -= left;
                seg++;
                off = 0;
            }
        }
    }
}

ssize_t pc_cma_readv(pid_t pid, size_t n_segments, const uintptr_t *local_addrs,
                     const uintptr_t *remote_addrs, const size_t *lengths,
                     size_t *err_seg)
{
    return cma_rw(pid, n_segments, local_addrs, remote_addrs, lengths, err_seg, 0);
}

ssize_t pc_cma_writev(pid_t pid, size_t n_segments, const uintptr_t *local_addrs,
                      const uintptr_t *remote_addrs, const size_t *lengths,
                      size_t *err_seg)
{
    return cma_rw(pid, n_segments, local_addrs, remote_addrs, lengths, err_seg, 1);
}

ssize_t pc_cma_read(pid_t pid, void *local, const void *remote, size_t n)
{
    uintptr_t l = (uintptr_t)local, r = (uintptr_t)remote;
    return cma_rw(pid, 1, &l, &r, &n, NULL, 0);
}

ssize_t pc_cma_write(pid_t pid, const void *local, void *remote, size_t n)
{
    uintptr_t l = (uintptr_t)local, r = (uintptr_t)remote;
    return cma_rw(pid, 1, &l, &r, &n, NULL, 1);
}

ssize_t pc_cma_probe(pid_t pid, void *local, size_t local_len, uintptr_t remote,
                     size_t riov_count, size_t riov_len, size_t riov_stride,
                     size_t reps, int64_t *times_ns)
{
    if (riov_count > IOV_MAX)
        return -EINVAL;
    struct iovec liov = {local, local_len}, riov[IOV_MAX];
    for (size_t k = 0; k < riov_count; k++)
        riov[k] = (struct iovec){(void *)(remote + k * riov_stride), riov_len};
    ssize_t got = 0;
    for (size_t r = 0; r < reps; r++) {
        int64_t t0 = pc_now_ns();
        got = process_vm_readv(pid, &liov, 1, riov, riov_count, 0);
        times_ns[r] = pc_now_ns() - t0;
        if (got < 0)
            return -errno;
    }
    return got;
}

int pc_allow_ptrace_any(void)
{
    if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0 || errno == EINVAL)
        return 0;
    return -errno;
}

int pc_drop_ptrace_any(void)
{
    if (prctl(PR_SET_PTRACER, 0, 0, 0, 0) == 0 || errno == EINVAL)
        return 0;
    return -errno;
}
