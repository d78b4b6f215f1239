! ranks: 2 3
! Point-to-point, wildcards, probes, persistent receives and collectives through use mpi
! (the checks are in fortran_checks.inc).
program usempi_p2p
  use mpi
  implicit none
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
