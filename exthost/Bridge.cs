using Azure.Storage.Queues.Models;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;
using Microsoft.Azure.WebJobs.Extensions.Timers;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace ExtHost;

/// <summary>An HTTP function call handed to the WebJobs host (JobHost.CallAsync) by the HTTP front, and its answer.</summary>
public sealed class HttpCall
{
    public required JObject Request { get; init; }
    public JObject? Response { get; set; }
}

/// <summary>
/// What each generated function (FunctionEmitter) runs: the trigger's value as the Functions host
/// hands it to a Node.js worker, the input bindings it binds through the real extensions (IBinder),
/// the invocation in the worker, then the output bindings written through the real extensions.
/// </summary>
public static class Bridge
{
    static NodeWorker? worker;
    static IReadOnlyDictionary<string, WorkerFunction> functions = new Dictionary<string, WorkerFunction>();

    public static void Initialize(NodeWorker w, IEnumerable<WorkerFunction> fns)
    {
        worker = w;
        functions = fns.ToDictionary(f => f.Name, StringComparer.OrdinalIgnoreCase);
    }

    static NodeWorker Worker => worker ?? throw new InvalidOperationException("the Node.js worker is not started");

    /// <summary>
    /// An orchestrator episode: the context JSON the extension builds for out-of-proc orchestrators
    /// (OrchestrationTriggerAttributeBindingProvider.OrchestrationContextToString) goes to the SDK; its
    /// answer (the OrchestratorState JSON: isDone, actions, output, customStatus, schemaVersion) is the
    /// return value the extension's OutOfProcOrchestrationShim replays. The extension blocks this
    /// orchestrator thread on the result, so the call runs on the thread pool.
    /// </summary>
    public static Task<object?> Orchestrator(string name, string contextJson) => Task.Run<object?>(async () =>
    {
        var result = await Worker.InvokeAsync(name, Parse(contextJson)).ConfigureAwait(false);
        var state = result["returnValue"];
        return state is JObject o ? o : state?.ToString(Formatting.None);
    });

    /// <summary>An activity: its input as JSON; the return value becomes the activity's output (the trigger handles it).</summary>
    public static Task<object?> Activity(string name, IDurableActivityContext context, IBinder binder) => Task.Run<object?>(async () =>
    {
        JToken? input = context.GetInput<JToken>();
        var fn = Fn(name);
        var result = await Worker.InvokeAsync(name, input, null, await Inputs(fn, binder).ConfigureAwait(false)).ConfigureAwait(false);
        await WriteOutputs(fn, result, binder).ConfigureAwait(false);
        return result["returnValue"];
    });

    /// <summary>A queue message: its text (the extension decoded it), the host's trigger metadata.</summary>
    public static Task Queue(string name, QueueMessage message, IBinder binder) => Task.Run(async () =>
    {
        var fn = Fn(name);
        string text = message.Body.ToString();
        var meta = new JObject
        {
            ["QueueTrigger"] = text,
            ["Id"] = message.MessageId,
            ["DequeueCount"] = message.DequeueCount,
            ["InsertionTime"] = message.InsertedOn?.ToString("O"),
            ["ExpirationTime"] = message.ExpiresOn?.ToString("O"),
            ["NextVisibleTime"] = message.NextVisibleOn?.ToString("O"),
            ["PopReceipt"] = message.PopReceipt,
        };
        var result = await Worker.InvokeAsync(name, text, meta, await Inputs(fn, binder).ConfigureAwait(false)).ConfigureAwait(false);
        await WriteOutputs(fn, result, binder).ConfigureAwait(false);
    });

    /// <summary>A timer tick: TimerInfo as the host serializes it for a worker.</summary>
    public static Task Timer(string name, TimerInfo timer, IBinder binder) => Task.Run(async () =>
    {
        var fn = Fn(name);
        var status = timer.ScheduleStatus;
        var trigger = new JObject
        {
            ["Schedule"] = new JObject { ["AdjustForDST"] = true },
            ["ScheduleStatus"] = status is null ? JValue.CreateNull() : new JObject
            {
                ["Last"] = status.Last.ToString("O"),
                ["Next"] = status.Next.ToString("O"),
                ["LastUpdated"] = status.LastUpdated.ToString("O"),
            },
            ["IsPastDue"] = timer.IsPastDue,
        };
        var result = await Worker.InvokeAsync(name, trigger, null, await Inputs(fn, binder).ConfigureAwait(false)).ConfigureAwait(false);
        await WriteOutputs(fn, result, binder).ConfigureAwait(false);
    });

    /// <summary>An HTTP call: the request goes to the worker, the `http` output (or `$return`) comes back as the response.</summary>
    public static Task Http(string name, HttpCall call, IBinder binder) => Task.Run(async () =>
    {
        var fn = Fn(name);
        var result = await Worker.InvokeAsync(name, call.Request, null, await Inputs(fn, binder).ConfigureAwait(false)).ConfigureAwait(false);
        await WriteOutputs(fn, result, binder).ConfigureAwait(false);
        string? httpOut = fn.Bindings.FirstOrDefault(b => b.Value.Value<string>("type") == "http" && b.Value.Value<string>("direction") == "out").Key;
        JToken? response = httpOut is null or "$return" ? result["returnValue"] : result["outputs"]?[httpOut];
        call.Response = response as JObject;
    });

    static WorkerFunction Fn(string name) =>
        functions.TryGetValue(name, out var fn) ? fn : throw new InvalidOperationException($"no function named {name} in the worker");

    static JToken? Parse(string json) =>
        JsonConvert.DeserializeObject<JToken>(json, new JsonSerializerSettings { DateParseHandling = DateParseHandling.None });

    /// <summary>Input bindings other than the trigger: `durableClient` (the extension's client JSON, with rpcBaseUrl).</summary>
    static async Task<JObject?> Inputs(WorkerFunction fn, IBinder binder)
    {
        JObject? inputs = null;
        foreach (var (bindingName, binding) in fn.Bindings)
        {
            if (bindingName == fn.TriggerName || binding.Value<string>("direction") != "in") continue;
            string type = binding.Value<string>("type") ?? "";
            if (type is "durableClient" or "orchestrationClient")
            {
                var attribute = new DurableClientAttribute
                {
                    TaskHub = binding.Value<string>("taskHub"),
                    ConnectionName = binding.Value<string>("connectionName") ?? binding.Value<string>("connection"),
                };
                string json = await binder.BindAsync<string>(attribute).ConfigureAwait(false);
                (inputs ??= new JObject())[bindingName] = Parse(json);
            }
            else
            {
                throw new NotSupportedException($"function {fn.Name}: input binding type {type} is not supported by exthost");
            }
        }
        return inputs;
    }

    /// <summary>Queue outputs through the queue extension's own collector (an array is one message per item).</summary>
    static async Task WriteOutputs(WorkerFunction fn, JObject result, IBinder binder)
    {
        foreach (var (bindingName, binding) in fn.Bindings)
        {
            if (binding.Value<string>("direction") != "out") continue;
            string type = binding.Value<string>("type") ?? "";
            if (type == "http") continue;
            if (type != "queue") throw new NotSupportedException($"function {fn.Name}: output binding type {type} is not supported by exthost");
            JToken? value = bindingName == "$return" ? result["returnValue"] : result["outputs"]?[bindingName];
            if (value is null || value.Type == JTokenType.Null) continue;
            var attribute = new QueueAttribute(binding.Value<string>("queueName")) { Connection = binding.Value<string>("connection") };
            var collector = await binder.BindAsync<IAsyncCollector<string>>(attribute).ConfigureAwait(false);
            foreach (var item in value is JArray array ? array.ToArray() : [value])
            {
                if (item.Type == JTokenType.Null) continue;
                await collector.AddAsync(item.Type == JTokenType.String ? item.Value<string>()! : item.ToString(Formatting.None)).ConfigureAwait(false);
            }
            await collector.FlushAsync().ConfigureAwait(false);
        }
    }
}
