# frozen_string_literal: true

require_relative "helpers"
require_relative "data"
require_relative "paging"
require_relative "graph"
require_relative "pages/dashboard"
require_relative "pages/queues"
require_relative "pages/busy"
require_relative "pages/sets"
require_relative "pages/ordered"
require_relative "pages/dedup"
require_relative "pages/job_metrics"
require_relative "pages/cron"
require_relative "pages/limits"
require_relative "pages/batches"
require_relative "pages/api"

module JobQueue
  class Web
    # One request: its params, session, flash and CSRF token, and the page actions (one module per
    # page under web/pages/) that answer it. Templates are evaluated on this object.
    class Page
      include Helpers
      include Pages::Dashboard
      include Pages::Queues
      include Pages::Busy
      include Pages::Sets
      include Pages::Ordered
      include Pages::Dedup
      include Pages::JobMetrics
      include Pages::Cron
      include Pages::Limits
      include Pages::Batches
      include Pages::Api

      CSRF_KEY = "queue.csrf"
      SHARD_KEY = "queue.shard"
      FLASH_KEY = "queue.flash"
      MODULES = [Pages::Dashboard, Pages::Queues, Pages::Busy, Pages::Sets, Pages::Ordered, Pages::Dedup, Pages::Batches, Pages::Cron,
                 Pages::Limits, Pages::JobMetrics, Pages::Api].freeze

      def self.draw(router)
        MODULES.each { |mod| mod.routes(router) }
        router.get("/style.css", :stylesheet)
      end

      # Compiled templates, by name (views/NAME.erb); each becomes a method of Page.
      def self.view_method(name)
        @views ||= {}
        @views[name] ||= begin
          path = File.join(ROOT, "views", "#{name}.erb")
          raise ArgumentError, "no view #{name}" unless File.exist?(path)

          method = :"__view_#{name.to_s.tr("/", "_")}"
          # Compiled in Page's scope, so templates name Page's constants (Helpers, Pages) directly.
          class_eval("def #{method}(locals = {})\n#{Template.load(path).src.dup.force_encoding(Encoding::UTF_8)}\nend", path, -1)
          method
        end
      end

      attr_reader :request, :params

      # The shard the pages show, with several configured (config.redis_shards): `?shard=NAME`
      # chooses one and the session keeps it; "main" until then. nil with one shard. An unknown name
      # (a shard since removed) falls back to "main".
      def shard
        shards = JobQueue.config.shards
        return nil unless shards.many?

        chosen = params["shard"].to_s
        session[SHARD_KEY] = chosen if shards.names.include?(chosen)
        name = session[SHARD_KEY].to_s
        shards.names.include?(name) ? name : Shards::MAIN
      end

      def initialize(request, route_params)
        @request = request
        @params = request.params.merge(route_params)
      rescue Rack::Utils::InvalidParameterError, EOFError
        @request = request
        @params = route_params
      end

      def session = request.session

      def csrf_token
        session[CSRF_KEY] ||= SecureRandom.urlsafe_base64(32)
      end

      def csrf_valid?
        sent = params["authenticity_token"] || request.get_header("HTTP_X_CSRF_TOKEN")
        known = session[CSRF_KEY]
        sent.is_a?(String) && known.is_a?(String) && Rack::Utils.secure_compare(sent, known)
      end

      # Renders a view inside the layout.
      def render(view, status: 200, title: nil, **locals)
        @title = title
        @body = partial(view, **locals)
        html(status, partial(:layout))
      end

      def partial(view, **locals)
        public_send(self.class.view_method(view), locals)
      end

      def html(status, body)
        [status, {"content-type" => "text/html; charset=utf-8", "cache-control" => "no-store",
                  "x-frame-options" => "SAMEORIGIN", "x-content-type-options" => "nosniff",
                  "content-security-policy" => "default-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'self'"}, [body.to_s]]
      end

      def json(object, status: 200)
        [status, {"content-type" => "application/json", "cache-control" => "no-store"}, [JSON.generate(object)]]
      end

      # After a POST: back to a page, with a message for it.
      def redirect(path, notice = nil)
        session[FLASH_KEY] = notice if notice
        [303, {"location" => url(path), "content-type" => "text/plain"}, ["see #{url(path)}"]]
      end

      def flash
        @flash = session.delete(FLASH_KEY) unless defined?(@flash)
        @flash
      end

      def not_found(status = 404)
        message = status == 405 ? "Method not allowed" : "Not found"
        return json({"error" => message}, status: status) if request.path_info.start_with?("/api/")

        render(:error, status: status, title: message, message: message)
      end

      def forbidden
        render(:error, status: 403, title: "Forbidden",
          message: "The form's security token did not match this session. Reload the page and try again.")
      end

      def stylesheet
        [200, {"content-type" => "text/css; charset=utf-8", "cache-control" => "public, max-age=3600"},
          [File.read(File.join(ROOT, "assets", "style.css"), encoding: Encoding::UTF_8)]]
      end
    end
  end
end
