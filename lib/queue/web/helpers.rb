# frozen_string_literal: true

module JobQueue
  class Web
    # What templates call. Anything returning HTML returns a SafeString; everything else is escaped
    # where the template writes it.
    module Helpers
      NAV = [["/", "Dashboard"], ["/queues", "Queues"], ["/busy", "Busy"], ["/scheduled", "Scheduled"],
        ["/retries", "Retries"], ["/dead", "Dead"], ["/ordered", "Ordered"], ["/dedup", "Dedup"], ["/batches", "Batches"],
        ["/cron", "Cron"], ["/limits", "Limits"], ["/job-metrics", "Metrics"]].freeze

      def h(text) = CGI.escapeHTML(text.to_s)

      def raw(html) = SafeString.new(html.to_s)

      # A path inside the dashboard, wherever it is mounted, with an optional query.
      def url(path, query = {})
        query = query.reject { |_, v| v.nil? || v == "" }
        base = "#{request.script_name}#{path}"
        query.empty? ? base : "#{base}?#{Rack::Utils.build_query(query)}"
      end

      def current?(path)
        here = request.path_info.to_s
        path == "/" ? ["", "/"].include?(here) : here == path || here.start_with?("#{path}/")
      end

      def csrf_field
        raw(%(<input type="hidden" name="authenticity_token" value="#{h(csrf_token)}">))
      end

      # A one-button form posting to `path` (the only way the dashboard changes anything).
      def button(label, path, css: "btn", fields: {})
        hidden = fields.map { |k, v| %(<input type="hidden" name="#{h(k)}" value="#{h(v)}">) }.join
        raw(%(<form method="post" action="#{h(url(path))}" class="inline">#{csrf_field}#{hidden}) +
          %(<button type="submit" class="#{h(css)}">#{h(label)}</button></form>))
      end

      def number(n)
        n.to_i.to_s.reverse.scan(/\d{1,3}/).join(",").reverse.then { |s| n.to_i.negative? ? "-#{s}" : s }
      end

      # "3 min ago" / "in 2 h" for a Time or a job timestamp (epoch seconds, or Sidekiq 8's integer
      # milliseconds); the exact time in the title.
      def relative_time(time)
        time = Timestamp.time(time.is_a?(Numeric) ? time : time&.to_f) unless time.is_a?(Time)
        return raw("&ndash;") if time.nil?

        delta = time.to_f - Time.now.to_f
        text = duration(delta.abs)
        words = delta.abs < 1 ? "just now" : (delta.negative? ? "#{text} ago" : "in #{text}")
        raw(%(<time datetime="#{time.utc.iso8601}" title="#{time.utc.strftime("%F %T UTC")}">#{words}</time>))
      end

      def duration(seconds)
        seconds = seconds.to_f
        if seconds < 60 then "#{seconds.round(seconds < 10 ? 1 : 0)} s"
        elsif seconds < 3600 then "#{(seconds / 60).floor} min"
        elsif seconds < 86_400 then "#{(seconds / 3600).floor} h"
        else "#{(seconds / 86_400).floor} d"
        end
      end

      def truncate(text, length = 120)
        text = text.to_s
        text.length > length ? "#{text[0, length - 1]}…" : text
      end

      # Job arguments as one line of JSON (escaped by the template).
      def args_text(args, length = 160)
        truncate(JSON.generate(args), length)
      rescue JSON::GeneratorError, TypeError
        truncate(args.inspect, length)
      end

      def pretty_json(value)
        JSON.pretty_generate(value)
      rescue JSON::GeneratorError, TypeError
        value.inspect
      end

      def bytes(n)
        n = n.to_f
        return "#{n.round} KB" if n < 1024

        n < 1024 * 1024 ? "#{(n / 1024).round(1)} MB" : "#{(n / 1024 / 1024).round(1)} GB"
      end
    end
  end
end
