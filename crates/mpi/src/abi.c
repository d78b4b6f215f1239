#include "abi.h"
#include <stddef.h> /* NULL, in MPICH's MPI_T_*_NULL */

const struct ms_abi ms_abi = {
    .comm_world = MPI_COMM_WORLD,
    .comm_self = MPI_COMM_SELF,
    .comm_null = MPI_COMM_NULL,
    .request_null = MPI_REQUEST_NULL,
    .message_null = MPI_MESSAGE_NULL,
    .message_no_proc = MPI_MESSAGE_NO_PROC,
    .byte = MPI_BYTE,
    .packed = MPI_PACKED,
    .datatype_null = MPI_DATATYPE_NULL,
    .uint64 = MPI_UINT64_T,
    .int_ = MPI_INT,
    .op_sum = MPI_SUM,
    .op_max = MPI_MAX,
    .op_min = MPI_MIN,
    .errors_return = MPI_ERRORS_RETURN,
    .errors_are_fatal = MPI_ERRORS_ARE_FATAL,
#ifdef MPI_ERRORS_ABORT
    .errors_abort = MPI_ERRORS_ABORT,
#else
    .errors_abort = MPI_ERRORS_ARE_FATAL,
#endif
    .info_null = MPI_INFO_NULL,
    .status_ignore = MPI_STATUS_IGNORE,
    .statuses_ignore = MPI_STATUSES_IGNORE,
    .in_place = MPI_IN_PLACE,
    .comm_null_copy_fn = MPI_COMM_NULL_COPY_FN,
    .any_source = MPI_ANY_SOURCE,
    .any_tag = MPI_ANY_TAG,
    .proc_null = MPI_PROC_NULL,
    .undefined = MPI_UNDEFINED,
    .tag_ub_key = MPI_TAG_UB,
    .success = MPI_SUCCESS,
    .err_buffer = MPI_ERR_BUFFER,
    .err_count = MPI_ERR_COUNT,
    .err_type = MPI_ERR_TYPE,
    .err_tag = MPI_ERR_TAG,
    .err_comm = MPI_ERR_COMM,
    .err_rank = MPI_ERR_RANK,
    .err_request = MPI_ERR_REQUEST,
    .err_truncate = MPI_ERR_TRUNCATE,
    .err_in_status = MPI_ERR_IN_STATUS,
    .err_pending = MPI_ERR_PENDING,
    .err_other = MPI_ERR_OTHER,
    .err_intern = MPI_ERR_INTERN,
    .err_arg = MPI_ERR_ARG,
    .err_root = MPI_ERR_ROOT,
    .thread_single = MPI_THREAD_SINGLE,
    .thread_multiple = MPI_THREAD_MULTIPLE,
    .combiner_named = MPI_COMBINER_NAMED,
    .max_error_string = MPI_MAX_ERROR_STRING,
    .max_info_val = MPI_MAX_INFO_VAL,
    .unsigned_long_long = MPI_UNSIGNED_LONG_LONG,
    .t_enum_null = MPI_T_ENUM_NULL,
    .t_pvar_handle_null = MPI_T_PVAR_HANDLE_NULL,
    .t_verbosity_user_basic = MPI_T_VERBOSITY_USER_BASIC,
    .t_bind_mpi_comm = MPI_T_BIND_MPI_COMM,
    .t_class_state = MPI_T_PVAR_CLASS_STATE,
    .t_class_level = MPI_T_PVAR_CLASS_LEVEL,
    .t_class_counter = MPI_T_PVAR_CLASS_COUNTER,
    .t_class_timer = MPI_T_PVAR_CLASS_TIMER,
    .t_err_invalid = MPI_T_ERR_INVALID,
    .t_err_invalid_index = MPI_T_ERR_INVALID_INDEX,
    .t_err_invalid_handle = MPI_T_ERR_INVALID_HANDLE,
    .t_err_invalid_name = MPI_T_ERR_INVALID_NAME,
    .t_err_pvar_no_startstop = MPI_T_ERR_PVAR_NO_STARTSTOP,
    .t_err_pvar_no_write = MPI_T_ERR_PVAR_NO_WRITE,
};

int *ms_unweighted(void) { return MPI_UNWEIGHTED; }
int *ms_weights_empty(void) { return MPI_WEIGHTS_EMPTY; }

#define MS_DEFINE(Handle, Prefix, name) \
    MPI_##Handle ms_##name##_f2c(MPI_Fint handle) { return MPI_##Prefix##_f2c(handle); } \
    MPI_Fint ms_##name##_c2f(MPI_##Handle handle) { return MPI_##Prefix##_c2f(handle); }
MS_CONVERSIONS(MS_DEFINE)
