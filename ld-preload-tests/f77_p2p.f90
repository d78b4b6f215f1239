! ranks: 2 3
! Point-to-point, wildcards, probes, persistent receives and collectives through mpif.h
! (the checks are in fortran_checks.inc).
program f77_p2p
  implicit none
  include 'mpif.h'
  integer :: rank, nranks, ierr
  logical :: bad = .false., anyfail = .false.
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call run_checks()
  call PMPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (anyfail) then
      write (*, '(a)') 'verdict: FAIL'
    else
      write (*, '(a)') 'verdict: PASS'
    end if
  end if
  call MPI_Finalize(ierr)
  if (anyfail) stop 1
contains
  include 'fortran_checks.inc'
end program
