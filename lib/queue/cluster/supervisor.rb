# frozen_string_literal: true

module JobQueue
  module Cluster
    # The parent of a cluster: forks a process for each Child, and until a stop, keeps each slot
    # filled.
    #
    # - A child that dies is started again after a backoff: 0.5 s, doubling with each death in a row
    #   up to 30 s; one that ran STABLE seconds starts the count again. Each death is logged with the
    #   child's index, pid, queues, exit status or signal, and the delay. Its running jobs stay in its
    #   working lists, and the liveness beat of a live process puts them back (ARCHITECTURE.md,
    #   "Liveness and recovery").
    # - TERM and INT stop every child (each finishes its running jobs within `-t`) and the parent exits
    #   0 once they have; one still alive `-t` + HARD_TIMEOUT seconds later is killed. TSTP (and USR1)
    #   quiets every child, and a child that dies after that is not restarted. TTIN goes to every child.
    # - With `--max-memory`, each child's RSS is read every `memory_interval` seconds; a child past the
    #   limit is sent TSTP (it takes no new job), then TERM (its running jobs get `-t` to finish), and a
    #   new child takes its slot as soon as it has exited (no backoff: it did not fail).
    # - Under systemd (NOTIFY_SOCKET, Notify): READY=1 once every child is ready, STOPPING=1, STATUS=,
    #   WATCHDOG=1 while every ready child pings.
    #
    # Signals are trapped into a pipe and handled by the loop, as the CLI does for one server.
    class Supervisor
      SIGNALS = %w[INT TERM TSTP TTIN USR1].freeze
      TICK = 0.2
      BACKOFF_FIRST = 0.5
      BACKOFF_CAP = 30.0
      STABLE = 60.0
      HARD_TIMEOUT = 5.0

      # run_child: called in each forked process with its Child; returns the process's exit status.
      def initialize(children, timeout:, max_memory: nil, memory_interval: 3.0, notify: nil, logger: JobQueue.logger, &run_child)
        @children = children
        @timeout = timeout
        @max_memory = max_memory
        @memory_interval = memory_interval
        @notify = notify
        @logger = logger
        @run_child = run_child
        @stopping = false
        @quiet = false
        @ready_sent = false
        @status = nil
      end

      # Runs the cluster until it is stopped and every child has exited; returns the exit status.
      def run
        @reader, @writer = IO.pipe
        SIGNALS.each { |sig| trap(sig) { @writer.write_nonblock("#{sig}\n", exception: false) } }
        @next_memory_check = now + @memory_interval if @max_memory
        @last_ping = now
        @children.each { |child| start(child) }
        supervise until @stopping && @children.none?(&:running?)
        @logger.info("queue cluster stopped")
        0
      ensure
        SIGNALS.each { |sig| trap(sig, "DEFAULT") }
      end

      private

      def supervise
        IO.select([@reader, *@notify&.sockets], nil, nil, TICK)
        signals = @reader.read_nonblock(1024, exception: false)
        signals.split("\n").each { |sig| handle(sig) } if signals.is_a?(String)
        listen
        reap
        restart_due unless @stopping
        check_memory if @max_memory && !@stopping && now >= @next_memory_check
        kill_overdue
        tell_systemd
        update_title
      end

      def handle(sig)
        case sig
        when "INT", "TERM" then stop(sig)
        when "TSTP", "USR1"
          @quiet = true
          @logger.info("quiet: passing TSTP to every child; a child that exits now is not restarted")
          each_running { |child| child.signal("TSTP") }
        when "TTIN" then each_running { |child| child.signal("TTIN") }
        end
      end

      def stop(sig)
        return if @stopping

        @stopping = true
        @notify&.send("STOPPING=1")
        @logger.info("#{sig}: stopping #{@children.count(&:running?)} child(ren) (timeout #{@timeout}s)")
        deadline = now + @timeout + HARD_TIMEOUT
        each_running do |child|
          child.kill_at = [child.kill_at, deadline].compact.min
          child.signal("TERM")
        end
      end

      # Forks the process of a slot.
      def start(child)
        @notify&.receive(child.index) # what an earlier process of the slot left unread
        pid = ::Process.fork { in_child(child) }
        child.started(pid, now)
        @logger.info("#{child} started")
      end

      # The forked process: drops what belongs to the parent, then runs the server.
      def in_child(child)
        # Until the server traps its own: TERM and INT end a child that has no job yet; a TSTP must
        # not suspend it (its default action), so it is ignored until then.
        SIGNALS.each { |sig| trap(sig, %w[INT TERM].include?(sig) ? "DEFAULT" : "IGNORE") }
        @reader.close
        @writer.close
        @notify&.close_in_child
        status = @run_child.call(child)
        $stdout.flush
        $stderr.flush
        # Not `exit`: at_exit blocks the parent registered (the app's, the test runner's) are the
        # parent's to run, once.
        ::Process.exit!(status || 0)
      rescue SystemExit => e
        ::Process.exit!(e.status)
      rescue Exception => e # rubocop:disable Lint/RescueException -- a forked process must never return into the parent's code
        warn "queue: #{child}: #{e.class}: #{e.message}"
        ::Process.exit!(1)
      end

      # Every child the loop can reap.
      def reap
        loop do
          pid, status = ::Process.wait2(-1, ::Process::WNOHANG)
          break unless pid

          child = @children.find { |c| c.pid == pid }
          exited(child, status) if child
        end
      rescue Errno::ECHILD
        nil
      end

      def exited(child, status)
        label = child.to_s
        replacing = child.replacing
        lived = child.exited(now)
        how = describe(status)
        if @stopping
          @logger.info("#{label} #{how}")
        elsif replacing && !@quiet
          @logger.info("#{label} #{how} after passing the memory limit; starting its replacement")
          child.failures = 0
          start(child)
        elsif @quiet
          @logger.warn("#{label} #{how}; not restarted: the cluster is quiet")
        else
          child.failures = lived >= STABLE ? 1 : child.failures + 1
          delay = [BACKOFF_FIRST * (2**(child.failures - 1)), BACKOFF_CAP].min
          child.restart_at = now + delay
          @logger.warn("#{label} #{how} after #{lived.round(1)}s; restarting it in #{delay}s")
        end
      end

      def describe(status)
        if status.signaled?
          "was killed by SIG#{Signal.signame(status.termsig)}"
        else
          "exited with status #{status.exitstatus}"
        end
      end

      def restart_due
        @children.each do |child|
          start(child) if !child.running? && child.restart_at && now >= child.restart_at
        end
      end

      def check_memory
        @next_memory_check = now + @memory_interval
        each_running do |child|
          next if child.replacing

          rss = Memory.rss(child.pid)
          next unless rss && rss > @max_memory

          @logger.warn("#{child} uses #{Memory.human(rss)}, past --max-memory #{Memory.human(@max_memory)}: " \
                       "quieting it (TSTP), stopping it (TERM: its running jobs get #{@timeout}s) and replacing it")
          child.replacing = true
          child.kill_at = now + @timeout + HARD_TIMEOUT
          child.signal("TSTP")
          child.signal("TERM")
        end
      end

      def kill_overdue
        each_running do |child|
          next unless child.kill_at && now >= child.kill_at

          @logger.warn("#{child} still runs #{HARD_TIMEOUT}s past the #{@timeout}s timeout: killing it (SIGKILL)")
          child.kill_at = nil
          child.signal("KILL")
        end
      end

      # READY=1 and WATCHDOG=1 from each child's engine, on the socket of its slot.
      def listen
        return unless @notify

        @children.each do |child|
          @notify.receive(child.index).each do |line|
            next unless child.running?

            child.ready = true if line == "READY=1"
            child.pinged_at = now if line == "WATCHDOG=1"
          end
        end
      end

      def tell_systemd
        return unless @notify

        ready = @children.count(&:ready)
        status = @stopping ? "stopping: #{@children.count(&:running?)} of #{@children.size} processes left" : "#{ready} of #{@children.size} processes ready"
        if !@ready_sent && !@stopping && ready == @children.size
          @ready_sent = true
          @notify.send("READY=1")
        end
        @notify.send("STATUS=#{status}") if status != @status
        @status = status
        ping_watchdog
      end

      # WATCHDOG=1 every half interval while each ready child pinged within the interval: a child whose
      # engine froze holds it back, and systemd restarts the group.
      def ping_watchdog
        every = @notify.watchdog
        return unless every && now - @last_ping >= every
        return unless @children.all? { |c| !c.ready || (c.pinged_at && now - c.pinged_at < every * 2) }

        @last_ping = now
        @notify.send("WATCHDOG=1")
      end

      def update_title
        state = @stopping ? " stopping" : (@quiet ? " quiet" : "")
        ::Process.setproctitle("queue-cluster #{VERSION} [#{@children.count(&:running?)} of #{@children.size} processes]#{state}")
      end

      def each_running(&block)
        @children.select(&:running?).each(&block)
      end

      def now
        ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
      end
    end
  end
end
