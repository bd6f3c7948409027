/* DLPack's C ABI, as much of it as papcoll reads: declared here, once, from the DLPack
 * specification v0.8 (dlpack.h; https://dmlc.github.io/dlpack/latest/c_api.html), as neither
 * Python, numpy nor mpi4py installs a dlpack.h to include. Every producer's capsule is laid
 * out by this ABI. Of the enums, only the values papcoll names are listed.
 */
#ifndef PAPCOLL_DLPACK_H
#define PAPCOLL_DLPACK_H

#include <stdint.h>

typedef enum {
    kDLCPU = 1,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
    uint8_t code;     /* a DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;    /* NULL: compact, row-major */
    uint64_t byte_offset;
} DLTensor;

/* What a capsule named "dltensor" points to; its consumer calls deleter, once. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif
