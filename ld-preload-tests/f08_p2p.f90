! ranks: 2 3
! native-known-fail: mpich
! Point-to-point, wildcards, probes, persistent receives and collectives through use mpi_f08,
! with and without the optional ierror.  Native MPICH 4.0.2's mpi_f08 returns 0-based indices
! from MPI_Waitany, MPI_Testany and MPI_Testsome.
program f08_p2p
  use mpi_f08
  implicit none
  integer :: rank, nranks
  logical :: bad = .false., anyfail = .false.
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call send_recv()
  call wildcards()
  call nonblocking()
  call probes()
  call persistent()
  call collectives()
  call PMPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    if (anyfail) then
      write (*, '(a)') 'verdict: FAIL'
    else
      write (*, '(a)') 'verdict: PASS'
    end if
  end if
  call MPI_Finalize()
  if (anyfail) stop 1
contains

  ! Rank 0 prints "ok NAME" or "FAIL NAME: rank R", gathered with PMPI_ calls.
  subroutine report(name)
    character(len=*), intent(in) :: name
    integer :: mine, first
    mine = nranks
    if (bad) mine = rank
    call PMPI_Allreduce(mine, first, 1, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD)
    if (rank == 0) then
      if (first < nranks) then
        write (*, '(a, a, a, i0)') 'FAIL ', name, ': rank ', first
        anyfail = .true.
      else
        write (*, '(a, a)') 'ok ', name
      end if
      flush (6)
    end if
    bad = .false.
  end subroutine

  subroutine expect(cond)
    logical, intent(in) :: cond
    if (.not. cond) bad = .true.
  end subroutine

  subroutine fill(buf, src, tag)
    integer, intent(out) :: buf(:)
    integer, intent(in) :: src, tag
    integer :: i
    do i = 1, size(buf)
      buf(i) = src * 1000 + tag * 10 + i
    end do
  end subroutine

  logical function holds(buf, src, tag)
    integer, intent(in) :: buf(:), src, tag
    integer :: i
    holds = .true.
    do i = 1, size(buf)
      if (buf(i) /= src * 1000 + tag * 10 + i) holds = .false.
    end do
  end function

  subroutine check_status(st, src, tag, count)
    type(MPI_Status), intent(in) :: st
    integer, intent(in) :: src, tag, count
    integer :: got
    call MPI_Get_count(st, MPI_INTEGER, got)
    call expect(st%MPI_SOURCE == src .and. st%MPI_TAG == tag .and. got == count)
  end subroutine

  subroutine send_recv()
    integer :: buf(8), ierr
    type(MPI_Status) :: st
    if (rank == 0) then
      call fill(buf, 0, 1)
      call MPI_Send(buf, 8, MPI_INTEGER, 1, 1, MPI_COMM_WORLD, ierr)
    else if (rank == 1) then
      st%MPI_ERROR = 4711
      call MPI_Recv(buf, 8, MPI_INTEGER, 0, 1, MPI_COMM_WORLD, st, ierr)
      call expect(ierr == MPI_SUCCESS .and. holds(buf, 0, 1) .and. st%MPI_ERROR == 4711)
      call check_status(st, 0, 1, 8)
    end if
    call report('send_recv')
  end subroutine

  subroutine wildcards()
    integer :: buf(4), tag
    type(MPI_Status) :: st
    if (rank == 0) then
      do tag = 10, 12
        call fill(buf, 0, tag)
        call MPI_Send(buf, 4, MPI_INTEGER, 1, tag, MPI_COMM_WORLD)
      end do
    else if (rank == 1) then
      do tag = 10, 12
        call MPI_Recv(buf, 4, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st)
        call expect(holds(buf, 0, tag))
        call check_status(st, 0, tag, 4)
      end do
    end if
    call report('wildcards_in_send_order')
  end subroutine

  subroutine nonblocking()
    integer :: buf(4, 3), tag, idx, outcount, indices(3)
    type(MPI_Request) :: req(3)
    type(MPI_Status) :: sts(3), st
    logical :: flag
    if (rank == 1) then
      do tag = 3, 1, -1
        call MPI_Irecv(buf(:, tag), 4, MPI_INTEGER, 0, 20 + tag, MPI_COMM_WORLD, req(tag))
      end do
    end if
    call MPI_Barrier(MPI_COMM_WORLD)
    if (rank == 0) then
      do tag = 1, 3
        call fill(buf(:, tag), 0, 20 + tag)
        call MPI_Send(buf(:, tag), 4, MPI_INTEGER, 1, 20 + tag, MPI_COMM_WORLD)
      end do
    else if (rank == 1) then
      call MPI_Waitall(3, req, sts)
      do tag = 1, 3
        call expect(holds(buf(:, tag), 0, 20 + tag) .and. req(tag) == MPI_REQUEST_NULL)
        call check_status(sts(tag), 0, 20 + tag, 4)
      end do
    end if
    call report('irecv_waitall')
    if (rank == 1) then
      call MPI_Irecv(buf(:, 1), 4, MPI_INTEGER, 0, 31, MPI_COMM_WORLD, req(1))
      call MPI_Irecv(buf(:, 2), 4, MPI_INTEGER, 0, 32, MPI_COMM_WORLD, req(2))
    end if
    call MPI_Barrier(MPI_COMM_WORLD)
    if (rank == 0) then
      call fill(buf(:, 2), 0, 32)
      call MPI_Send(buf(:, 2), 4, MPI_INTEGER, 1, 32, MPI_COMM_WORLD)
      call fill(buf(:, 1), 0, 31)
      call MPI_Send(buf(:, 1), 4, MPI_INTEGER, 1, 31, MPI_COMM_WORLD)
    else if (rank == 1) then
      call MPI_Waitany(2, req, idx, st)
      call expect(idx == 1 .or. idx == 2)
      call check_status(st, 0, 30 + idx, 4)
      outcount = 0
      do while (outcount == 0)
        call MPI_Testsome(2, req, outcount, indices, sts)
      end do
      call expect(outcount == 1 .and. indices(1) == 3 - idx)
      call MPI_Waitall(2, req, MPI_STATUSES_IGNORE)
      call expect(holds(buf(:, 1), 0, 31) .and. holds(buf(:, 2), 0, 32))
      call MPI_Irecv(buf(:, 2), 4, MPI_INTEGER, 0, 33, MPI_COMM_WORLD, req(2))
    end if
    call MPI_Barrier(MPI_COMM_WORLD)
    if (rank == 0) then
      call fill(buf(:, 1), 0, 33)
      call MPI_Send(buf(:, 1), 4, MPI_INTEGER, 1, 33, MPI_COMM_WORLD)
    else if (rank == 1) then
      flag = .false.
      do while (.not. flag)
        call MPI_Testany(2, req, idx, flag, st)
      end do
      call expect(idx == 2 .and. holds(buf(:, 2), 0, 33))
      call check_status(st, 0, 33, 4)
    end if
    call report('waitany_testsome_testany')
  end subroutine

  subroutine probes()
    integer :: buf(4)
    type(MPI_Status) :: st
    type(MPI_Message) :: msg
    logical :: flag
    if (rank == 0) then
      call fill(buf, 0, 40)
      call MPI_Send(buf, 4, MPI_INTEGER, 1, 40, MPI_COMM_WORLD)
      call fill(buf, 0, 41)
      call MPI_Send(buf, 4, MPI_INTEGER, 1, 41, MPI_COMM_WORLD)
    else if (rank == 1) then
      call MPI_Probe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, st)
      call check_status(st, 0, 40, 4)
      flag = .false.
      do while (.not. flag)
        call MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, flag, st)
      end do
      call check_status(st, 0, 40, 4)
      call MPI_Mprobe(0, 40, MPI_COMM_WORLD, msg, st)
      call MPI_Mrecv(buf, 4, MPI_INTEGER, msg, st)
      call expect(holds(buf, 0, 40))
      flag = .false.
      do while (.not. flag)
        call MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, flag, msg, st)
      end do
      call MPI_Mrecv(buf, 4, MPI_INTEGER, msg, MPI_STATUS_IGNORE)
      call expect(holds(buf, 0, 41))
    end if
    call report('probe_iprobe_mprobe_improbe')
  end subroutine

  subroutine persistent()
    integer :: buf(4), round
    type(MPI_Request) :: req
    type(MPI_Status) :: st
    if (rank == 1) call MPI_Recv_init(buf, 4, MPI_INTEGER, 0, 50, MPI_COMM_WORLD, req)
    do round = 1, 3
      if (rank == 1) call MPI_Start(req)
      call MPI_Barrier(MPI_COMM_WORLD)
      if (rank == 0) then
        call fill(buf, round, 50)
        call MPI_Send(buf, 4, MPI_INTEGER, 1, 50, MPI_COMM_WORLD)
      else if (rank == 1) then
        call MPI_Wait(req, st)
        call expect(holds(buf, round, 50) .and. req /= MPI_REQUEST_NULL)
        call check_status(st, 0, 50, 4)
      end if
    end do
    if (rank == 1) call MPI_Request_free(req)
    call report('persistent_receive')
  end subroutine

  subroutine collectives()
    integer :: one(4), all(4 * nranks), total, in_place
    type(MPI_Request) :: req
    type(MPI_Comm) :: dup
    call fill(one, rank, 60)
    call MPI_Bcast(one, 4, MPI_INTEGER, 0, MPI_COMM_WORLD)
    call expect(holds(one, 0, 60))
    call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    call expect(total == nranks * (nranks - 1) / 2)
    in_place = rank + 1
    call MPI_Allreduce(MPI_IN_PLACE, in_place, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
    call expect(in_place == nranks)
    call fill(one, rank, 61)
    call MPI_Gather(one, 4, MPI_INTEGER, all, 4, MPI_INTEGER, 0, MPI_COMM_WORLD)
    if (rank == 0) call expect(holds(all(4 * nranks - 3:), nranks - 1, 61))
    call MPI_Ibarrier(MPI_COMM_WORLD, req)
    call MPI_Wait(req, MPI_STATUS_IGNORE)
    call MPI_Comm_dup(MPI_COMM_WORLD, dup)
    call MPI_Allreduce(1, total, 1, MPI_INTEGER, MPI_SUM, dup)
    call expect(total == nranks)
    call MPI_Comm_free(dup)
    call expect(dup == MPI_COMM_NULL)
    call report('collectives')
  end subroutine
end program
