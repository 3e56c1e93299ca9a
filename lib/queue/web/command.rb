# frozen_string_literal: true

require_relative "../command_options"

module JobQueue
  class Web
    # `queue web [--port 7433] [--bind 127.0.0.1] [-r APP] [-e ENV]`: serves the dashboard alone, on
    # Puma when it is installed (Debian's `puma`), else on WEBrick. The app is loaded first (with -r)
    # for its Redis settings and its ordered workers.
    class Command
      DEFAULT_PORT = 7433

      def initialize(out: $stdout)
        @out = out
      end

      # Parses the flags, boots the app through the block, and serves until stopped.
      def run(argv)
        options = parse(argv)
        return 0 if options[:exit]

        yield options if block_given?
        require_relative "../web"
        handler, name = server
        @out.puts "queue web: #{name} on http://#{options[:bind]}:#{options[:port]}/ (Ctrl-C stops)"
        @out.flush
        handler.run(JobQueue::Web, Host: options[:bind], Port: options[:port], **server_options(name))
        0
      end

      def parse(argv)
        options = {port: DEFAULT_PORT, bind: "127.0.0.1"}
        OptionParser.new do |o|
          o.banner = "Usage: queue web [options]   (the dashboard, alone)"
          o.on("-p", "--port PORT", Integer, "port to listen on (default #{DEFAULT_PORT})") do |v|
            raise OptionParser::InvalidArgument, "#{v} (must be 1..65535)" unless (1..65_535).cover?(v)

            options[:port] = v
          end
          o.on("-b", "--bind HOST", "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)") { |v| options[:bind] = v }
          CommandOptions.app(o, options, loads: "configures Redis and loads ordered workers")
          CommandOptions.help(o, options, @out)
        end.parse(argv)
        options
      end

      private

      def server
        require "rack/handler/puma"
        [Rack::Handler::Puma, "puma"]
      rescue LoadError
        require "rack/handler/webrick"
        [Rack::Handler::WEBrick, "webrick"]
      end

      def server_options(name)
        name == "puma" ? {Threads: "1:5", Silent: true} : {}
      end
    end
  end
end
