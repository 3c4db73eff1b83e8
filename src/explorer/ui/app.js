// replicheck's copy of stateright 0.31's explorer script (ui/app.js, MIT licensed, by the
// stateright authors), patched for `replicheck explore` (src/explorer/server.rs serves it):
// - every property's status at the selected state comes from replicheck
//   (`/.replicheck/path/...`), not from whether stateright's search found a discovery on the
//   path (stateright never evaluates a property at a state);
// - liveness properties get a line; a path that ends where it was before (a lasso) has its
//   loop marked in the path and a link to the loop's start;
// - the model's name and variant show; "same state" compares fingerprints, not text.

/// Represents the checker status. Reloads periodically until checking completes.
function Status({done, state_count, unique_state_count, max_depth, model, properties, recent_path}) {
    let status = this;

    status.stateCount = state_count.toLocaleString();
    status.uniqueStateCount = unique_state_count.toLocaleString();
    status.maxDepth = max_depth.toLocaleString();
    status.model = model.replace(/[0-9A-Za-z_]+::/g, '');
    status.progress = 'Done';
    if (!done) {
        status.progress = (recent_path || '').length < 100
            ? recent_path
            : recent_path.substring(0, 99 - 3) + '...';
    }
    status.properties = properties.map((p) => {
        return getProperty(p, done)
    });
    status.recentPath = recent_path;
}

/// Placeholder status.
Status.LOADING = new Status({
    done: 'loading...',
    state_count: 'loading...',
    unique_state_count: 'loading...',
    max_depth: 'loading...',
    model: 'loading...',
    properties: [],
    recent_path: 'loading...',
});

function getProperty(p, done) {
    let expectation = p[0];
    let discoveryPath = p[2];
    return {
        expectation,
        name: p[1],
        discoveryPath,
        summary: (() => {
            if (discoveryPath) {
                switch (expectation) {
                    case 'Always':
                        return '✗ Counterexample found: ';
                    case 'Sometimes':
                        return '✓ Example found: ';
                    case 'Eventually':
                        return '✗ Counterexample found: ';
                    default:
                        throw new Error(`Invalid expectation ${expectation}.`);
                }
            } else {
                if (!done) {
                    return '… Searching: '
                }
                ;
                switch (expectation) {
                    case 'Always':
                        return '✓ Safety holds (whole state space): ';
                    case 'Sometimes':
                        return '✗ Example not found: ';
                    case 'Eventually':
                        return '✓ Liveness holds: ';
                    default:
                        throw new Error(`Invalid expectation ${expectation}.`);
                }
            }
        })(),
    };
}

/// Represents a model step. Only loads next steps on demand.
function Step({action, outcome, state, fingerprint, actionIndex, properties, prevStep, svg}) {
    let step = this;
    step.fingerprint = fingerprint;

    step.action = action || `Init ${actionIndex !== undefined ? actionIndex : 'unknown'}`;
    step.outcome = outcome;
    step.state = state;
    step.svg = svg;
    step.actionIndex = actionIndex;
    step.prevStep = prevStep;

    step.path = prevStep && actionIndex !== undefined ? prevStep.path + '/' + actionIndex : '';

    // The number of actions from the initial state (-1 before it).
    step.depth = step.path === '' ? -1 : step.path.split('/').length - 2;

    step.pathSteps = () => (prevStep ? prevStep.pathSteps() : []).concat([step]);
    step.nextSteps = ko.observableArray();
    step.computeOffsetTo = (dstStep) => {
        let offset = 0;
        for (let cursor = step; cursor; cursor = cursor.prevStep) {
            if (cursor == dstStep) {
                return offset;
            }
            ++offset;
        }
        return null;
    };
    step.computeUriWithOffset = (offset) => {
        return `#/steps${step.path}?offset=${offset}`;
    };
    step.fetchNextSteps = async () => {
        Step._NEXT_STEPS = Step._NEXT_STEPS || {};
        let cached = Step._NEXT_STEPS[step.path];
        if (cached) {
            return cached;
        }

        console.log('Fetching next steps.', {path: step.path});
        Step._NEXT_STEPS[step.path] = fetch(`/.states${step.path}`)
            .then(r => r.json())
            .then((nextSteps, err) => {
                if (err) {
                    console.log(err);
                }
                console.log('Response received.', {path: step.path, nextSteps});
                return nextSteps.map((nextStep, i) => new Step({
                    action: nextStep.action || `Init ${i}`,
                    outcome: nextStep.outcome,
                    state: nextStep.state,
                    fingerprint: nextStep.fingerprint,
                    svg: nextStep.svg,
                    actionIndex: nextStep.actionIndex,
                    properties: nextStep.properties,
                    prevStep: step,
                }));
            })
            .catch(err => {
                console.log('Failed. Removing from cache.', {path: step.path, err});
                Step._NEXT_STEPS[step.path] = undefined;
            });
        let nextSteps = await Step._NEXT_STEPS[step.path];
        step.nextSteps(nextSteps);
        return nextSteps;
    };
    step.isIgnored = 'undefined' === typeof step.state;
}

/// Special step that points to the init steps.
Step.PRE_INIT = new Step({
    action: 'Pre-init',
    state: 'No state selected',
    actionIndex: undefined,
    properties: [],
    prevStep: null,
});

/// Manages app state.
function App() {
    let app = this;

    app.selectedStep = ko.observable(Step.PRE_INIT);
    app.farthestStep = ko.observable(Step.PRE_INIT);
    app.isCompact = ko.observable(false);
    app.isCompleteState = ko.observable(false);
    app.showPerStateProperties = ko.observable(true);
    app.isSameStateAsSelected = (step) => step.fingerprint !== undefined
        && step.fingerprint == app.selectedStep().fingerprint;
    // replicheck's report on the farthest path: every property at every state, and its loop.
    app.report = ko.observable(null);
    app.reportError = ko.observable('');
    // The model's name and variant, from the report on the initial state (any path would do).
    app.modelInfo = ko.observable(null);
    app.title = ko.computed(() => {
        const r = app.modelInfo() || app.report();
        return r ? `${r.model} (variant ${r.variant})` : 'loading...';
    });
    fetch('/.replicheck/path/0')
        .then(r => r.json())
        .then(r => {
            app.modelInfo({model: r.model, variant: r.variant});
            document.title = `replicheck explorer: ${r.model} (${r.variant})`;
        })
        .catch(err => console.log('No model information.', err));
    app.loop = ko.computed(() => (app.report() && app.report().loop) || null);
    app.stepReport = (step) => {
        const r = app.report();
        return r && step.depth >= 0 && step.depth < r.steps.length ? r.steps[step.depth] : null;
    };
    app.selectedReport = ko.computed(() => app.stepReport(app.selectedStep()));
    app.stepNumber = (step) => step.depth < 0 ? '' : (step.depth === 0 ? 'init' : `${step.depth}.`);
    app.stepIcons = (step) => {
        const r = app.stepReport(step);
        if (!r) {
            return '';
        }
        return r.properties.some(p => p.kind === 'safety' && p.status === 'violated') ? '✗' : '✓';
    };
    app.loopMark = (step) => {
        const l = app.loop();
        if (!l || step.depth < 0) {
            return '';
        }
        if (step.depth === l.returns_to) {
            return `↺ loop start: step ${l.last} returns to this state`;
        }
        if (step.depth === l.last) {
            return `↺ back to the state after step ${l.returns_to}`;
        }
        return '';
    };
    app.inLoop = (step) => {
        const l = app.loop();
        return !!l && step.depth >= l.first && step.depth <= l.last;
    };
    app.statusIcon = (p) => {
        switch (p.status) {
            case 'holds': return '✓';
            case 'violated': return '✗';
            case 'undecided': return '–';
            default: return '✓';
        }
    };
    app.onKeyDown = (data, ev) => {
        switch (ev.keyCode) {
            case 38: // up arrow
            case 75: { // k (vim style)
                let offset = app.farthestStep().computeOffsetTo(app.selectedStep());
                offset = Math.min(offset + 1, app.farthestStep().pathSteps().length - 1);
                window.location = app.farthestStep().computeUriWithOffset(offset);
                break;
            }
            case 40: // down arrow
            case 74: { // k (vim style)
                let offset = app.farthestStep().computeOffsetTo(app.selectedStep());
                offset = Math.max(offset - 1, 0);
                window.location = app.farthestStep().computeUriWithOffset(offset);
                break;
            }
            default:
                return true;
        }
    };
    app.status = ko.observable(Status.LOADING);

    window.onhashchange = prepareView;
    window.onhashchange();
    refreshStatus();

    async function refreshStatus() {
        console.log('Refreshing status.');
        let response = await fetch('/.status');
        let json = await response.json();
        console.log({json});
        app.status(new Status(json));
        if (!json.done) {
            setTimeout(refreshStatus, 5000);
        }
    }

    async function loadReport(step) {
        app.reportError('');
        if (step.depth < 0) {
            app.report(null);
            return;
        }
        try {
            const response = await fetch(`/.replicheck/path${step.path}`);
            if (!response.ok) {
                app.reportError(await response.text());
                app.report(null);
                return;
            }
            const report = await response.json();
            document.title = `replicheck explorer: ${report.model} (${report.variant})`;
            if (app.farthestStep() === step) {
                app.report(report);
            }
        } catch (err) {
            app.reportError(`${err}`);
        }
    }

    async function prepareView() {
        let hash = window.location.hash;
        console.log('Hash changed. Preparing view.', {hash});

        // Canonicalize, then extract view name and remaining components.
        hash = hash || '#/steps';

        let [path, queryString] = hash.split('?');
        console.log({path, queryString});

        let components = path.split('/'); // e.g. ['#', 'steps', 4, 2]
        let view = components[1];
        components.shift();
        components.shift();

        switch (view) {
            case 'steps':
                let step = Step.PRE_INIT;
                while (true) {
                    let nextSteps = await step.fetchNextSteps();
                    let nextActionIndex = components.shift();
                    if (!nextActionIndex) {
                        app.selectedStep(step);
                        app.farthestStep(step);
                        loadReport(step);
                        break;
                    }
                    const next = (nextSteps || []).find(step => step.actionIndex == parseInt(nextActionIndex));
                    if (!next) {
                        app.reportError(`This path has no step with action index ${nextActionIndex} after ${step.path || 'the start'}: the link does not fit this model and variant.`);
                        app.selectedStep(step);
                        app.farthestStep(step);
                        break;
                    }
                    step = next;
                }
                break;
            default:
                throw new Error(`Invalid view: '${view}'`);
        }

        let pairs = (queryString || '').split('&');
        for (let pair of pairs) {
            let [qsKey, qsVal] = pair.split('=');
            console.log({qsKey, qsVal});

            switch (qsKey) {
                case 'offset':
                    for (let offset = parseInt(qsVal); offset > 0; --offset) {
                        app.selectedStep(app.selectedStep().prevStep);
                    }
                    break;
            }
        }
    }
}

async function runToCompletion() {
    console.log("continuing checker");
    let response = await fetch('/.runtocompletion', {method: 'POST'});
    console.log(response);
}

window.app = new App();
ko.applyBindings(window.app);
