/* MPI constants that mpi.h defines as macros, gathered into one object whose layout bindgen
 * reads, so the Rust side stays free of ABI assumptions (MPICH: ints, Open MPI: pointers). */
#include <mpi.h>

struct ms_abi {
    MPI_Comm comm_world, comm_self, comm_null;
    MPI_Request request_null;
    MPI_Message message_null, message_no_proc;
    MPI_Datatype byte, packed, datatype_null, uint64, int_;
    MPI_Op op_sum, op_max, op_min;
    MPI_Errhandler errors_return, errors_are_fatal, errors_abort;
    MPI_Info info_null;
    MPI_Status *status_ignore, *statuses_ignore;
    void *in_place;
    MPI_Comm_copy_attr_function *comm_null_copy_fn;
    int any_source, any_tag, proc_null, undefined, tag_ub_key;
    int success, err_buffer, err_count, err_type, err_tag, err_comm, err_rank, err_request,
        err_truncate, err_in_status, err_pending, err_other, err_intern, err_arg, err_root;
    int thread_single, thread_multiple, combiner_named;
    int max_error_string, max_info_val;
    /* The tool information interface (MPI_T). */
    MPI_Datatype unsigned_long_long;
    MPI_T_enum t_enum_null;
    MPI_T_pvar_handle t_pvar_handle_null;
    int t_verbosity_user_basic, t_bind_mpi_comm, t_class_state, t_class_level, t_class_counter,
        t_class_timer;
    int t_err_invalid, t_err_invalid_index, t_err_invalid_handle, t_err_invalid_name,
        t_err_pvar_no_startstop, t_err_pvar_no_write;
};

extern const struct ms_abi ms_abi;

/* Fortran's INTEGER (a typedef in MPICH, a macro in Open MPI). */
typedef MPI_Fint ms_fint;

/* Handle conversions between Fortran and C: macros in MPICH, functions in Open MPI. */
#define MS_CONVERSIONS(X) \
    X(Comm, Comm, comm) X(Datatype, Type, type) X(Op, Op, op) X(Group, Group, group) \
    X(Info, Info, info) X(Request, Request, request) X(Message, Message, message)
#define MS_DECLARE(Handle, Prefix, name) \
    MPI_##Handle ms_##name##_f2c(ms_fint handle); \
    ms_fint ms_##name##_c2f(MPI_##Handle handle);
MS_CONVERSIONS(MS_DECLARE)

/* Not constant in every MPI. */
int *ms_unweighted(void);
int *ms_weights_empty(void);
