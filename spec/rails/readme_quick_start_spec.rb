# frozen_string_literal: true

require "tmpdir"

# The README's "Rails quick start", run as written in a copy of spec/rails_app made to look like a
# fresh app (no RSpec, no config/queue.yml, its Gemfile.lock up to date), in development (no
# RAILS_ENV): each sh line in a shell, a Ruby block headed by a file name written to that file, any
# other Ruby block in `bin/rails runner`, and `bundle exec queue` as the server that runs the jobs.
# Gems go to a GEM_HOME of the copy's own (`bundle install` writes only the gem's binstub there).
RSpec.describe "README: Rails quick start" do
  blocks = Readme.fenced(Readme.section("## Rails quick start")).map { |block| [block.lang, block.code] }

  around do |example|
    Dir.mktmpdir("queue-quick-start-") do |dir|
      @dir = RailsApp.copy(dir)
      example.run
    end
  end

  def env
    gem_home = File.join(@dir, ".gems")
    RailsApp.env({"RAILS_ENV" => nil, "REDIS_URL" => TestRedis.url, "QUEUE_REDIS_URL" => nil, "GEM_HOME" => gem_home,
                  "GEM_PATH" => [gem_home, *Gem.path].join(File::PATH_SEPARATOR)}, dir: @dir)
  end

  def sh(line)
    output, status = Open3.capture2e(env, "bash", "-c", line, chdir: @dir)
    expect(status).to be_success, "#{line}\n#{output}"
    output
  end

  def fresh_app!
    gemfile = File.join(@dir, "Gemfile")
    File.write(gemfile, File.read(gemfile).sub(/^group :test do\n  gem "rspec"\nend\n/, ""))
    FileUtils.rm_rf(%w[spec .rspec config/queue.yml].map { |f| File.join(@dir, f) })
    sh("bundle lock --local")
  end

  def server(line)
    log = File.join(@dir, "log", "queue.log")
    FileUtils.mkdir_p(File.dirname(log))
    pid = Process.spawn(env, "bash", "-c", "exec #{line}", chdir: @dir, out: log, err: [:child, :out], pgroup: true)
    RailsApp::Server.new(pid, log)
  end

  it "runs as written: the gem installed, generated config and worker, a job run by `bundle exec queue`" do
    expect(blocks.map(&:first)).to eq(%w[ruby sh ruby ruby sh])
    fresh_app!
    servers = []
    blocks.each do |lang, code|
      if lang == "sh"
        code.lines.map(&:strip).reject(&:empty?).each do |line|
          line.start_with?("bundle exec queue") ? servers << server(line) : sh(line)
        end
      elsif (file = code[/\A# ([\w\/.]+)\n/, 1]) == "Gemfile"
        gems = File.read(File.join(@dir, "Gemfile"))
        code.scan(/^gem "([^"]+)"/).flatten.each { |gem| expect(gems).to match(/^gem "#{gem}"/) } # here with path: this checkout
      elsif file
        File.write(File.join(@dir, file), code)
      else
        output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner", code, dir: @dir, env: env)
        expect(status).to be_success, output
      end
    end

    expect(servers.size).to eq(1)
    servers.first.watch do |server|
      wait_until("HardWorker's job to run") { server.output.match?(/class=HardWorker jid=\h+ elapsed=\S+ INFO: done/) }
      expect(server.output).to match(/started as \S+: 2 threads on critical/)
      expect(server.output).not_to include("database pool")
      expect(JobQueue.stats).to include("processed" => 1, "failed" => 0, "scheduled_size" => 1)
      expect(server.stop.exitstatus).to eq(0)
    end

    # What the generators wrote: the worker alone (no RSpec here, so the note), queue.yml's comments true.
    expect(File).not_to exist(File.join(@dir, "spec", "workers", "hard_worker_spec.rb"))
    config = File.read(File.join(@dir, "config", "queue.yml"))
    expect(config).to include("# :max_batch: #{JobQueue::Configuration.new.max_batch}\n")
  end
end
